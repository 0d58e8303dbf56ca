#pragma once
// Cluster mode's side of JobManager (issue 15): compile jobs on the Redis
// Streams queue (job_queue_redis.h) that every kcached of the cluster serves.
// It has its own threads, which block on Redis outside JobManager's lock:
//   takers (one per worker)  take a job any node submitted, of a capability
//                            this node serves (job_capability.h), compile it
//                            through JobManager's runner, publish it through
//                            its publisher (every tier, every key), then
//                            write the final state (fenced) and ack; an
//                            autotune search runs as a local search of
//                            JobManager's (Parts::autotune)
//   heartbeat                renews the claims this node runs, reclaims the
//                            entries of stalled or dead nodes, advertises
//                            this node's capabilities, samples depth
//   waiter                   answers long-polls of jobs that live in Redis:
//                            woken by "job <id> <state>" on <ns>:events, and
//                            polling every 250 ms when pub/sub is silent
// Fail open: every call that cannot reach Redis says so (nullopt), and
// JobManager then queues the submission locally as in single-node mode.

#include <kcache/service/config.h>
#include <kcache/service/job_capability.h>
#include <kcache/service/job_intake.h>
#include <kcache/service/job_publisher.h>
#include <kcache/service/job_queue_redis.h>
#include <kcache/service/job_runner.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/redis_client.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace kcache::service {

class ClusterJobs {
public:
  // What it borrows from JobManager, which outlives it.
  struct Parts {
    JobRunner& runner;
    JobPublisher& publisher;
    Counter &ok, &failed, &cancelled;
    Histogram& compile_seconds;
    NodeHardware hardware; // with the runner's backends: the capabilities served
    // Runs a search this node took, on this node, to its end (or until
    // `cancel`): the cluster job with its final state, log and size; left
    // unfinished when this node shuts down meanwhile. It calls `progress`
    // with the search's variant steps (done, total) every few hundred ms
    // while it runs, from its own thread.
    using Progress = std::function<void(std::size_t done, std::size_t total)>;
    std::function<Job(const Job& search, const std::stop_token& cancel, const Progress& progress)>
        autotune;
  };
  ClusterJobs(const JobsConfig& jobs, const ClusterConfig& cluster,
              const storage::RedisOptions& redis, Parts parts, MetricsRegistry& metrics);
  ~ClusterJobs() { stop(); }
  ClusterJobs(const ClusterJobs&) = delete;
  ClusterJobs& operator=(const ClusterJobs&) = delete;

  // nullopt: Redis could not be asked (the caller queues the job locally).
  std::optional<SubmitResult> submit(const Job& job, const std::string& key);
  // Unavailable when Redis does not answer: not the same as no such job.
  JobLookup find(const std::string& id);
  JobLookup cancel(const std::string& id);
  // `done` runs once, on the waiter thread (or at once): with the job when it
  // finishes or at `deadline`, with no job when Redis knows no such job, and
  // unavailable when Redis did not answer once before `deadline`.
  void wait(const std::string& id, std::chrono::steady_clock::time_point deadline,
            std::function<void(JobLookup)> done);
  std::vector<Job> list(std::optional<JobState> state, std::size_t limit);
  std::size_t running() const;
  // What this node serves: the streams it reads.
  const std::vector<std::string>& capabilities() const { return queue_.capabilities(); }

  // Stops taking jobs and joins the threads: running compiles are killed and
  // left unacked (another node reclaims them after the visibility timeout);
  // waiters are answered with the job as it is.
  void stop();

private:
  using Clock = std::chrono::steady_clock;
  using WaitCallback = std::function<void(JobLookup)>;
  struct Running {
    RedisJobQueue::Claim claim;
    std::stop_source cancel;
    bool lost = false;
  };
  void take_loop(const std::stop_token& stop);
  void run(const RedisJobQueue::Claim& claim);
  void run_search(const RedisJobQueue::Claim& claim);
  compiler::WorkerOutcome compile(const RedisJobQueue::Claim& claim,
                                  const compiler::CompileSpec& spec, const std::stop_token& cancel);
  void heartbeat_loop(const std::stop_token& stop);
  // Ends a run: drops its claim from running_ and says whether the claim was
  // lost meanwhile and whether the node is stopping.
  struct RunEnd {
    bool lost = false;
    bool stopping = false;
  };
  RunEnd end_run(const std::string& id);
  void waiter_loop(const std::stop_token& stop);
  void sleep(const std::stop_token& stop, std::chrono::milliseconds how_long);

  const JobsConfig jobs_;
  const ClusterConfig cluster_;
  Parts parts_;
  std::unique_ptr<storage::RedisClient> redis_;
  RedisJobQueue queue_;
  Counter& reclaimed_;
  std::atomic<std::size_t> depth_{0};

  mutable std::mutex mu_;                  // guards the five below
  std::map<std::string, Running> running_; // job id -> its claim
  struct Waiters {
    std::vector<std::pair<Clock::time_point, WaitCallback>> calls; // deadline, callback
    std::optional<Job> last; // as last seen: what a deadline (or Redis down) answers
    // The job as last seen; unavailable if Redis never answered for it.
    JobLookup answer() const { return last ? JobLookup(last) : JobLookup::unavailable_now(); }
  };
  std::map<std::string, Waiters> waiters_; // job id -> its long-polls
  bool poke_ = false;                      // an event came: the waiter looks now
  bool stopping_ = false;
  std::condition_variable_any cv_;

  // Last: they stop and join before anything above is destroyed.
  std::unique_ptr<storage::RedisSubscription> events_;
  std::vector<std::jthread> threads_;
};

} // namespace kcache::service
