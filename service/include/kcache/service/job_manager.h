#pragma once
// Compile jobs. JobManager is the coordinator: it checks and keys a
// submission, then moves jobs between its parts under one lock:
//   JobIntake            a submitted spec checked and keyed
//   JobTable             every job; single-flight, negative cache, history
//   JobQueue             the waiting order and the durable records
//                        (LocalJobQueue: in memory + the RocksDB journal)
//   JobWorkerPool        the threads; each runs one job at a time through
//   JobRunner            a kcache-worker subprocess (or a test double)
//   JobPublisher         results into the artifact store, under every key
//   AutotuneCoordinator  searches: variant compiles, then the benchmark
// and answers waiters (long-polls) when their job finishes, after its result
// is published: a woken client's next get is a hit.

#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/worker_protocol.h>
#include <kcache/service/config.h>
#include <kcache/service/deadline_waiters.h>
#include <kcache/service/job.h>
#include <kcache/service/job_autotune.h>
#include <kcache/service/job_intake.h>
#include <kcache/service/job_publisher.h>
#include <kcache/service/job_queue.h>
#include <kcache/service/job_queue_cluster.h>
#include <kcache/service/job_runner.h>
#include <kcache/service/job_table.h>
#include <kcache/service/job_worker_pool.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/store.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kcache::service {

struct JobCounts {
  std::size_t queued = 0, running = 0, finished = 0;
  std::size_t workers = 0, queue_capacity = 0;
};

class JobManager {
public:
  // kcached's: a WorkerJobRunner over config.worker_binary (which must answer
  // --toolchains) and a LocalJobQueue journaled in `journal_dir`.
  static tl::expected<std::unique_ptr<JobManager>, std::string>
  create(const JobsConfig& config, const std::string& journal_dir, storage::Store& store,
         MetricsRegistry& metrics, const storage::RecordSigner* signer = nullptr);
  // Over any runner and queue (unit tests: a scripted runner, no journal).
  // Replays the queue's records and starts `config.workers` worker threads.
  static std::unique_ptr<JobManager> create(const JobsConfig& config,
                                            std::unique_ptr<JobRunner> runner,
                                            std::unique_ptr<JobQueue> queue, storage::Store& store,
                                            MetricsRegistry& metrics,
                                            const storage::RecordSigner* signer = nullptr);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  SubmitResult submit(const Submission& submission);
  // This node's job, or the cluster's (unavailable when Redis does not answer).
  JobLookup find(const std::string& id) const;
  // `done` runs once, on some thread: with the job when it finishes, or with
  // its state at `deadline`, or with no job for an unknown id (unavailable
  // when a cluster job could not be read from Redis all along).
  void wait(const std::string& id, std::chrono::steady_clock::time_point deadline,
            std::function<void(JobLookup)> done);
  // A count of the changes a listing shows: a job admitted, joined, started,
  // making progress or finished. The dashboard's live job list long-polls on it.
  std::uint64_t changes() const;
  // `done` runs once, on some thread: when changes() is past `seen`, at
  // `deadline`, or at once when it already is (or kcached is stopping). In
  // cluster mode the deadline is at most 2 s away: jobs other nodes run
  // change in Redis, with no event here.
  void wait_for_change(std::uint64_t seen, std::chrono::steady_clock::time_point deadline,
                       std::function<void()> done);
  // A queued job is cancelled at once; a running one when its worker is killed
  // (within ~50 ms). Returns the job as it is now; no job for an unknown id.
  JobLookup cancel(const std::string& id);
  // Newest first; `state` filters.
  std::vector<Job> list(std::optional<JobState> state, std::size_t limit) const;
  std::optional<std::size_t> queue_position(const std::string& id) const;
  JobCounts counts() const;
  const compiler::Toolchains& toolchains() const { return runner_->toolchains(); }
  // A request body longer than this cannot hold a spec within max_spec_bytes.
  std::uint64_t max_submission_bytes() const {
    return JobIntake::max_text_bytes(config_.max_spec_bytes);
  }

  // Cluster mode (job_queue_cluster.h): compile submissions go to the Redis
  // queue every node serves, and this node's workers take from it too; a
  // submission Redis cannot take is queued here. Call once, before serving.
  void enable_cluster(const ClusterConfig& cluster, const storage::RedisOptions& redis);
  // Each key a job's result is stored under, as it lands (JobPublisher::on_stored).
  void on_stored(std::function<void(const std::string& key)> listener) {
    publisher_.on_stored(std::move(listener));
  }
  // The capabilities this node serves in cluster mode (job_capability.h);
  // empty outside it.
  std::vector<std::string> cluster_capabilities() const {
    return cluster_ ? cluster_->capabilities() : std::vector<std::string>();
  }

  // Stops taking jobs, answers every waiter, kills running compiles (they stay
  // in the journal as queued and run after a restart) and joins the threads.
  void shutdown();

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  JobManager(PrivateTag, const JobsConfig& config, std::unique_ptr<JobRunner> runner,
             std::unique_ptr<JobQueue> queue, storage::Store& store, MetricsRegistry& metrics,
             const storage::RecordSigner* signer = nullptr);

private:
  using Clock = std::chrono::steady_clock;
  using WaitCallback = std::function<void(JobLookup)>;
  using Callbacks = std::vector<std::pair<WaitCallback, Job>>;
  struct Metrics {
    explicit Metrics(MetricsRegistry& registry);
    MetricsRegistry& registry;
    Counter &ok, &failed, &cancelled;
    Histogram &compile_seconds, &queue_seconds;
  };

  void recover();
  SubmitResult submit_uncounted(const Submission& submission);
  // Under mu_: the negative cache, single-flight (joining adds the key and the
  // parents), unless `force` the queue's bound and the submitter's quota for
  // the job and `children` more (an autotune search's variant compiles, held
  // in reserved_ until begin_autotune admits them), the journal, the queue.
  SubmitResult admit_locked(Job job, const std::string& key, bool queue_now, bool force,
                            std::size_t children = 0);
  std::optional<SubmitResult> lookup_cached(const std::string& key, const std::string& compile_key,
                                            const std::string& manifest_json = {});

  // Autotune glue (job_manager_autotune.cpp) around autotune_.
  // from_cluster: a search the cluster queue handed this node (Parts::autotune
  // of ClusterJobs) runs here, past the local queue's bounds.
  SubmitResult submit_autotune(const Submission& submission, bool from_cluster = false);
  // Runs a cluster search as a local one and waits for it: the cluster job as it ended.
  Job run_cluster_search(const Job& search, const std::stop_token& cancel,
                         const ClusterJobs::Parts::Progress& progress);
  // Parses the job's search and admits its variant compiles (the job fails
  // when the search is unusable).
  void begin_autotune(const std::string& id);
  void run_autotune(const std::string& id, const std::stop_token& cancel);

  // The worker side (job_manager_run.cpp): under mu_, the next job for the
  // pool; then running it.
  std::optional<std::string> take_next();
  void run_job(const std::string& id);
  void run_compile(const std::string& id, const std::stop_token& cancel);
  // Runs the compile; an infrastructure failure runs it again after a
  // back-off (doubling) while the job has attempts left. Cancelling ends the
  // back-off at once.
  compiler::WorkerOutcome compile_with_retries(const std::string& id,
                                               const compiler::CompileSpec& spec,
                                               const std::stop_token& cancel);
  void housekeeping_loop(const std::stop_token& stop);
  // Under mu_: moves the job to its final state, journals it, tells its
  // autotune parents and hands back its waiters (called after unlocking).
  // `job` may leave the history here: the copy is the job as it ended.
  struct Finished {
    Job job;
    Callbacks callbacks;
  };
  Finished finish_locked(Job& job, JobState state);
  void enqueue_locked(const Job& job);
  // Journals the job and counts the change (changes()).
  void journal_locked(const Job& job);
  void changed_locked();

  const JobsConfig config_;
  const std::unique_ptr<JobRunner> runner_;
  const JobIntake intake_;                  // over *runner_
  const std::string host_tuning_class_;     // this host's CPU, for CPU autotune
  const std::string host_gpu_tuning_class_; // its first GPU; "" without one
  JobPublisher publisher_;
  Metrics metrics_;

  mutable std::mutex mu_; // guards everything below but the threads
  std::condition_variable_any waiter_cv_;
  bool stopping_ = false;
  std::unique_ptr<JobQueue> queue_;
  JobTable table_;
  AutotuneCoordinator autotune_;
  std::unordered_map<std::string, std::stop_source> running_; // job id -> its cancel
  DeadlineWaiters<WaitCallback> waiters_;                     // job id -> long-polls
  std::uint64_t waiters_generation_ = 0;                      // bumped per new waiter
  std::uint64_t changes_ = 0;                                 // changes()
  // Long-polls of the listing, keyed by the changes() they saw; answered by
  // the housekeeper once it moved on (so a burst of changes wakes it once).
  DeadlineWaiters<std::function<void()>> change_waiters_;
  // Queue slots promised to admitted searches whose variants are not yet
  // admitted: search id -> slots; reserved_ is their sum.
  std::unordered_map<std::string, std::size_t> reservations_;
  std::size_t reserved_ = 0;

  // Set once before serving; its threads use runner_, publisher_ and metrics_.
  std::unique_ptr<ClusterJobs> cluster_;

  // Last: they stop and join before anything above is destroyed.
  std::unique_ptr<JobWorkerPool> pool_;
  std::jthread housekeeper_;
};

} // namespace kcache::service
