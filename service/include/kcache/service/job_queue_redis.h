#pragma once
// The cluster job queue's Redis protocol (contract section 3): what one node
// says to Redis to submit, take, renew, finish, find and cancel a compile job
// that any node may run. No threads and no state beyond a backlog of entries
// this node was handed but has not started; ClusterJobs (job_queue_cluster.h)
// drives it. Thread-safe as RedisClient is.
//
// Keys, all under the store namespace <ns>:
//   <ns>:q:{<capability>}:<band>
//                               a stream per capability (job_capability.h:
//                               "cpp/x86_64", "autotune/cpp/<tuning class>")
//                               and priority band (high, normal, low; one
//                               hash tag, so one blocking XREADGROUP reads
//                               all three), group "kcache", consumer = node
//                               id; an entry holds the job's JSON with its
//                               spec; acked and deleted once the job's final
//                               state is written. A node reads only the
//                               streams of the capabilities it serves.
//   <ns>:cap:{<capability>}     sorted set: the ids of the nodes serving it,
//                               scored by their last heartbeat (unix ms): a
//                               submission nobody live serves says it waits
//   <ns>:job:{<id>}             hash: state, job (JSON without the spec),
//                               node, attempts, token (fencing: +1 per claim),
//                               started_ms, sealed, cancel, capability and
//                               wanted (what a queued job waits for),
//                               progress_done/_total (a search as it runs,
//                               fenced); TTL job_ttl
//   <ns>:job:{<id>}:keys        set: every key the result is published under
//   <ns>:sf:{<compile_key>}     single-flight owner (SET NX PX): the job id
//   <ns>:neg:{<compile_key>}    a failed compile's job id (negative cache, TTL)
//   <ns>:jobs                   sorted set of job ids by submission (listings)
//   <ns>:sub:{<submitter>}      sorted set: the submitter's queued or running
//                               job ids by submission (unix ms), for
//                               max_jobs_per_submitter: added at submit,
//                               removed when the job ends; ids older than
//                               job_ttl, or whose job ended without removing
//                               its id (a node died in between), are pruned
//   <ns>:events                 pub/sub: "job <id> <state>"
// A job's final state is written by a Lua script that first checks the claim's
// token: a node whose claim was reclaimed (stalled past the visibility
// timeout) cannot mark the job or ack its entry.

#include <kcache/service/job.h>
#include <kcache/service/job_intake.h>
#include <kcache/storage/redis_client.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kcache::service {

struct ClusterQueueOptions {
  std::string node_id;
  std::vector<std::string> capabilities; // job_capability.h: the streams this node reads
  std::string cpu_arch;                  // a native compile's target class
  // A node's advertisement counts as live this long after its heartbeat.
  std::chrono::milliseconds advertise_ttl{15000};
  std::chrono::milliseconds visibility_timeout{30000};
  std::chrono::milliseconds job_ttl{std::chrono::hours(24)};
  std::chrono::milliseconds negative_ttl{60000};
  // Redis Cluster: one command's keys must share a slot (takers block on one
  // capability's streams at a time instead of all of them).
  bool redis_cluster = false;
  // Queued or running cluster jobs per submitter, counted cluster-wide; 0: no cap.
  std::size_t max_jobs_per_submitter = 0;
};

class RedisJobQueue {
public:
  RedisJobQueue(storage::RedisClient& redis, ClusterQueueOptions options);

  // A new compile job (id, compile key, spec, keys as JobIntake made them):
  // kQueued (its message says when no live node serves its capability
  // yet: it waits for one), or kJoined to the job of the same compile key anywhere in the
  // cluster (`key` is added to its keys), or kFailedRecently (the same spec
  // failed within the negative TTL), or kCached with `job` unset when the
  // job it would join has published already (the caller links its key).
  // An error: Redis could not be asked (the caller queues locally).
  // `admit` is asked once this submission owns the compile key (so not for
  // a join): an answer it gives instead (kCached: a job finished between the
  // caller's cache lookup and now; kBusy: the cluster queue is full) is
  // returned and nothing is queued.
  using Admit = std::function<std::optional<SubmitResult>()>;
  storage::Result<SubmitResult> submit(const Job& job, const std::string& key,
                                       const Admit& admit = {});

  // A job this node claimed: its token fences what it writes.
  struct Claim {
    std::string stream, entry;
    Job job; // with its spec; attempts as claimed
    std::int64_t token = 0;
  };
  // The next job for this node: the backlog first, then each capability's
  // bands highest first, then one blocking read of `block`. nullopt: none.
  storage::Result<std::optional<Claim>> take(std::chrono::milliseconds block);
  // Entries of any node idle past the visibility timeout move into this
  // node's backlog; returns how many. `running`: entry ids this node runs.
  storage::Result<std::size_t> reclaim(const std::set<std::string>& running);

  enum class Renewal { kHeld, kCancelled, kLost };
  // Renews a running claim (its idle time and claimed_ms); kCancelled when a
  // cancel was asked for, kLost when another node holds the job now.
  // A Redis error reads as kHeld: the claim is lost only when Redis says so.
  Renewal renew(const Claim& claim);

  // Every key the result goes under (the compile key included).
  storage::Result<std::vector<std::string>> keys(const std::string& id);
  // After publishing: marks the job sealed (a later submission links its key
  // itself) and returns its keys, so any that joined meanwhile are published
  // too. nullopt: the claim was lost.
  storage::Result<std::optional<std::vector<std::string>>> seal(const Claim& claim);
  // The job's final state, fenced by the claim's token; then the single-flight
  // key is released, a cacheable failure remembered, the entry acked and
  // deleted and "job <id> <state>" published. False: the claim was lost.
  storage::Result<bool> finish(const Claim& claim, const Job& job);
  // A running search's progress (variant steps), fenced as finish is: a node
  // whose claim was taken over writes nothing. False: the claim was lost.
  storage::Result<bool> progress(const Claim& claim, std::size_t done, std::size_t total);

  // nullopt: no such job (or it expired).
  storage::Result<std::optional<Job>> find(const std::string& id);
  // A queued job is cancelled at once; a running one is asked to stop (its
  // node sees it at its next renewal). The job as it is now.
  storage::Result<std::optional<Job>> cancel(const std::string& id);
  // Newest first, at most `limit`; `state` filters.
  storage::Result<std::vector<Job>> list(std::optional<JobState> state, std::size_t limit);
  // Entries waiting or running in this node's streams.
  storage::Result<std::size_t> depth();
  // Heartbeat: this node serves its capabilities (and drops nodes silent
  // past advertise_ttl from each capability's set).
  storage::Result<void> advertise();
  // How many nodes served `capability` within advertise_ttl.
  storage::Result<std::size_t> live_nodes(const std::string& capability);
  const std::vector<std::string>& capabilities() const { return options_.capabilities; }

  std::string events_channel() const { return redis_.key("events"); }
  std::size_t backlog() const;

private:
  std::string stream(const std::string& capability, int priority) const;
  std::vector<std::string> streams(const std::string& capability) const; // highest band first
  std::string advert_key(const std::string& capability) const;
  static std::string waiting_reason(const std::string& wanted, const std::string& capability);
  std::string job_key(const std::string& id) const;
  std::string keys_key(const std::string& id) const;
  storage::Result<void> ensure_group(const std::string& stream);
  // The entries of an XREADGROUP/XAUTOCLAIM reply, into the backlog.
  std::size_t add_entries(const std::string& stream, const storage::RedisReply& entries,
                          const std::set<std::string>& skip);
  storage::Result<std::optional<Claim>> claim_backlog();
  storage::Result<SubmitResult> join(const std::string& owner, const Job& job,
                                     const std::string& key);
  std::string submitter_key(const std::string& submitter) const;
  // The answer when the submitter is at its quota (nullopt: it may submit).
  storage::Result<std::optional<SubmitResult>> over_quota(const Job& job);
  // The job ended (or never queued): it no longer counts against its submitter.
  void uncount(const Job& job);
  storage::Result<void> release_single_flight(const std::string& compile_key,
                                              const std::string& id);
  void ack(const std::string& stream, const std::string& entry);

  storage::RedisClient& redis_;
  const ClusterQueueOptions options_;
  mutable std::mutex mu_; // guards the two below
  struct Entry {
    std::string stream, entry, job_json;
  };
  std::deque<Entry> backlog_;
  std::set<std::string> groups_;        // streams whose group this process created
  std::atomic<bool> cross_slot_{false}; // a standalone URL that turned out a Redis Cluster
  std::atomic<std::size_t> turn_{0};    // Redis Cluster: the capability blocked on next
};

} // namespace kcache::service
