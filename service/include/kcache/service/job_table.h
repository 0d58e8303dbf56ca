#pragma once
// Every job kcached knows: the active ones (queued or running) and a bounded
// history of finished ones. It keeps compiles single-flight (one active job
// per compile key; a submission of the same compile joins it) and remembers
// recent failures (the negative cache). No threads and no I/O: JobManager
// guards it with its lock and journals what it reports.

#include <kcache/service/job.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kcache::service {

class JobTable {
public:
  using Clock = std::chrono::steady_clock;

  // `history`: finished jobs kept; `negative_ttl`: how long a failure of the
  // compile itself (is_cacheable_failure) answers a resubmission; 0: never.
  JobTable(std::size_t history, std::chrono::milliseconds negative_ttl)
      : history_(history), negative_ttl_(negative_ttl) {}

  Job* find(const std::string& id);
  const Job* find(const std::string& id) const;

  // The job that failed this very spec (every byte: the compile key leaves
  // out diagnostics flags, and "-Werror" can fail a spec that compiles
  // without it) within the TTL; nullptr when none.
  const Job* failed_recently(const Job& job, Clock::time_point now);
  // The queued or running job for `compile_key`.
  Job* active(const std::string& compile_key);
  // Adds a submission to an active job: one more submission, its key and its
  // autotune parents. True when it raised the job's priority (the caller
  // moves it up the queue).
  static bool join(Job& existing, const std::string& key, const std::vector<std::string>& parents,
                   int priority);
  // A new active job.
  Job& add(Job job);
  // Active jobs (queued or running) added for `submitter`.
  std::size_t active_jobs(const std::string& submitter) const;

  struct Finished {
    Job job;                          // as it ended
    std::vector<std::string> evicted; // fell out of the history: erase their records
  };
  // Moves an active job to its final state at `wall_ms`, remembers a
  // cacheable failure, and trims the history. The history keeps the spec's
  // digest, not its text (a spec may be megabytes; history is thousands).
  Finished finish(Job& job, JobState state, std::int64_t wall_ms, Clock::time_point now);
  // A job read back from the journal: an active one becomes single-flight
  // again; a finished one enters the history and, if it failed within the
  // TTL, the negative cache for what is left of it. Returns the evicted ids.
  std::vector<std::string> restore(Job job, std::int64_t wall_ms, Clock::time_point now);

  void expire_failures(Clock::time_point now);
  // Newest first; `state` filters.
  std::vector<Job> list(std::optional<JobState> state, std::size_t limit) const;
  std::size_t finished() const { return finished_order_.size(); }

private:
  struct Failure {
    std::string job_id;
    Clock::time_point expires;
  };
  std::vector<std::string> remember_finished(const Job& job, std::int64_t wall_ms,
                                             Clock::time_point now);

  const std::size_t history_;
  const std::chrono::milliseconds negative_ttl_;
  std::unordered_map<std::string, Job> jobs_;                  // active and remembered
  std::deque<std::string> finished_order_;                     // oldest first
  std::unordered_map<std::string, std::string> active_by_key_; // compile key -> job id
  std::unordered_map<std::string, Failure> failures_;          // failure_key() -> failure
  std::unordered_map<std::string, std::size_t> active_by_submitter_;
};

} // namespace kcache::service
