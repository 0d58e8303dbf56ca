#pragma once
// Compile jobs: submission with single-flight, a bounded priority queue, a pool
// of threads that each drive one kcache-worker subprocess at a time, the
// journal that makes jobs survive a restart, a negative cache of failures, and
// waiters (long-polls) woken when their job finishes.
//
// A job's result is published as an artifact in every storage tier, under the
// compile key and under every client key that asked for it, before any waiter
// is woken: a woken client's next get is a hit.

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/worker_protocol.h>
#include <kcache/compiler/worker_runner.h>
#include <kcache/service/config.h>
#include <kcache/service/deadline_waiters.h>
#include <kcache/service/job.h>
#include <kcache/service/job_journal.h>
#include <kcache/service/job_queue.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/artifact_store.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kcache::service {

struct Submission {
  std::string key;       // the client's key; "" publishes under the compile key only
  std::string spec_json; // a CompileSpec; with an "autotune" member, a search
  int priority = 0;
  std::string tuning_class; // autotune: must be this node's, if given
};

enum class SubmitStatus {
  kQueued,         // a new job
  kJoined,         // the same compile was already queued or running: one job for both
  kCached,         // the artifact exists already: nothing to compile
  kFailedRecently, // the same compile failed within the negative-cache TTL
  kBusy,           // the queue is full: retry later
  kInvalid,        // the spec or the key is malformed
  kUnavailable,    // no worker, a backend not built into the worker, or shutting down
  kStoreError,     // the store or the journal failed
};
std::string_view submit_status_name(SubmitStatus status);

struct SubmitResult {
  SubmitStatus status = SubmitStatus::kInvalid;
  std::optional<Job> job;
  std::string message;
};

struct JobCounts {
  std::size_t queued = 0, running = 0, finished = 0;
  std::size_t workers = 0, queue_capacity = 0;
};

class JobManager {
public:
  // Learns the worker's toolchains (kcache-worker --toolchains), replays the
  // journal in `journal_dir`, and starts `config.workers` worker threads.
  static tl::expected<std::unique_ptr<JobManager>, std::string>
  create(const JobsConfig& config, const std::string& journal_dir, storage::Store& store,
         MetricsRegistry& metrics);
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  SubmitResult submit(const Submission& submission);
  std::optional<Job> find(const std::string& id) const;
  // `done` runs once, on some thread: with the job when it finishes, or with
  // its state at `deadline`, or with nullopt for an unknown id.
  void wait(const std::string& id, std::chrono::steady_clock::time_point deadline,
            std::function<void(std::optional<Job>)> done);
  // A queued job is cancelled at once; a running one when its worker is killed
  // (within ~50 ms). Returns the job as it is now; nullopt for an unknown id.
  std::optional<Job> cancel(const std::string& id);
  // Newest first; `state` filters.
  std::vector<Job> list(std::optional<JobState> state, std::size_t limit) const;
  std::optional<std::size_t> queue_position(const std::string& id) const;
  JobCounts counts() const;
  const compiler::Toolchains& toolchains() const { return toolchains_; }

  // Stops taking jobs, answers every waiter, kills running compiles (they stay
  // in the journal as queued and run after a restart) and joins the threads.
  void shutdown();

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  JobManager(PrivateTag, const JobsConfig& config, compiler::WorkerRunner runner,
             compiler::Toolchains toolchains, std::optional<compiler::HostTarget> host_target,
             std::unique_ptr<JobJournal> journal, storage::Store& store, MetricsRegistry& metrics);

private:
  using Clock = std::chrono::steady_clock;
  struct Failure {
    std::string job_id;
    Clock::time_point expires;
  };
  using WaitCallback = std::function<void(std::optional<Job>)>;
  using Callbacks = std::vector<std::pair<WaitCallback, Job>>;

  void recover();
  SubmitResult submit_uncounted(const Submission& submission);
  tl::expected<std::string, std::string> compile_key_of(const compiler::CompileSpec& spec) const;
  static Job compile_job(const compiler::CompileSpec& spec, const std::string& compile_key,
                         std::string spec_json, int priority);
  // Under mu_: the negative cache, single-flight (joining adds the key and the
  // parents), the queue's bound unless `force`, the journal, the queue.
  SubmitResult admit_locked(Job job, const std::string& key, bool queue_now, bool force);

  // Autotune (job_autotune.cpp): a search job waits for its variants' compile
  // jobs (children), then benchmarks them on a worker thread.
  struct AutotuneState {
    std::string device; // cpu | cuda: where the variants are timed
    compiler::CompileSpec base;
    compiler::AutotuneSearch search;
    compiler::Space space;
    std::vector<std::string> compile_keys;             // per space.variants, then the reference's
    std::map<std::string, std::string> compile_errors; // compile key -> why it failed
    std::size_t pending = 0;
  };
  SubmitResult submit_autotune(const Submission& submission);
  // Parses the job's search and admits its variant compiles (the job fails
  // when the search is unusable).
  void begin_autotune(const std::string& id);
  void on_child_finished_locked(const Job& child);
  void run_autotune(const std::string& id, const std::stop_token& cancel);

  // The spec a job compiles: checked hermetic and canonical (spec_check.h),
  // "native" resolved to this host's CPU; or why it is refused.
  tl::expected<compiler::CompileSpec, SubmitResult> prepare(compiler::CompileSpec spec) const;
  std::optional<SubmitResult> lookup_cached(const std::string& key, const std::string& compile_key);
  void worker_loop(const std::stop_token& stop);
  void housekeeping_loop(const std::stop_token& stop);
  void run_job(const std::string& id);
  void publish(const std::string& id, const compiler::CompileResult& result,
               const std::map<std::string, std::string>& toolchain);
  // Under mu_: moves the job to its final state, journals it and hands back
  // its waiters (called after the lock is released).
  Callbacks finish_locked(Job& job, JobState state);
  void remember_finished_locked(const Job& job);
  void journal_locked(const Job& job);

  const JobsConfig config_;
  const compiler::WorkerRunner runner_;
  const compiler::Toolchains toolchains_;
  const std::optional<compiler::HostTarget> host_target_; // for target "native"
  const std::string host_tuning_class_;                   // this host's CPU, for CPU autotune
  const std::string host_gpu_tuning_class_;               // its first GPU; "" without one
  std::unique_ptr<JobJournal> journal_;
  storage::ArtifactStore artifacts_;

  mutable std::mutex mu_;
  std::condition_variable_any work_cv_;
  std::condition_variable_any waiter_cv_;
  bool stopping_ = false;
  JobQueue queue_;
  std::unordered_map<std::string, Job> jobs_;                  // active and remembered
  std::deque<std::string> finished_order_;                     // oldest first
  std::unordered_map<std::string, std::string> active_by_key_; // compile key -> job id
  std::unordered_map<std::string, Failure> failures_;          // failure_key() -> failure
  std::unordered_map<std::string, std::stop_source> running_;  // job id -> its cancel
  DeadlineWaiters<WaitCallback> waiters_;                      // job id -> long-polls
  std::unordered_map<std::string, AutotuneState> autotunes_;   // autotune job id ->
  std::uint64_t waiters_generation_ = 0;                       // bumped per new waiter
  std::size_t running_count_ = 0;

  Counter& compiles_ok_;
  Counter& compiles_failed_;
  Counter& compiles_cancelled_;
  Histogram& compile_seconds_;
  Histogram& queue_seconds_;
  MetricsRegistry& metrics_;

  // Last: they stop and join before anything above is destroyed.
  std::vector<std::jthread> workers_;
  std::jthread housekeeper_;
};

} // namespace kcache::service
