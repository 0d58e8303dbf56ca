#pragma once
// Where jobs wait for a worker and where their records outlive the process.
// JobManager sees only this interface: LocalJobQueue (an in-process priority
// queue and the RocksDB journal).
//
// Not thread-safe: JobManager calls it under its own lock.
//
// The cluster seam (issue 15) is NOT a second JobQueue: a cluster worker must
// block on Redis for a job submitted on another node, outside JobManager's
// lock, and a job's record lives in Redis rather than in this node's table.
// So cluster mode is a component beside the local queue, ClusterJobs
// (job_queue_cluster.h over RedisJobQueue, job_queue_redis.h), with its own
// taker threads: JobManager forwards a compile submission to it first and
// falls back to this queue when Redis cannot be asked (fail open), and asks it
// for jobs its own table does not know (find, wait, cancel, list). ClusterJobs
// borrows JobManager's runner, publisher and metrics. In local mode nothing of
// it exists and JobManager behaves as before.

#include <kcache/service/job.h>

#include <tl/expected.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kcache::service {

class JobQueue {
public:
  virtual ~JobQueue() = default;

  // The order: highest priority first, first come first served within one.
  // False when full, unless `force` (jobs resumed from the journal, and an
  // autotune search's own compiles, are never dropped), or already queued.
  virtual bool push(const std::string& id, int priority, bool force) = 0;
  virtual std::optional<std::string> pop() = 0;
  virtual bool remove(const std::string& id) = 0;
  // 0-based place in line, or nullopt when not queued.
  virtual std::optional<std::size_t> position(const std::string& id) const = 0;
  virtual std::size_t size() const = 0;
  virtual std::size_t capacity() const = 0;

  // The durable records: written at submission, start and finish; read back
  // once at startup. A put replaces the job's record.
  virtual tl::expected<void, std::string> put(const Job& job) = 0;
  virtual tl::expected<void, std::string> erase(const std::string& id) = 0;
  virtual std::vector<Job> load() const = 0;
};

} // namespace kcache::service
