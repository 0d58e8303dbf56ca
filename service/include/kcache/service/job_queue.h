#pragma once
// Where jobs wait for a worker and where their records outlive the process.
// JobManager sees only this interface: the first implementation is
// LocalJobQueue (an in-process priority queue and the RocksDB journal); the
// cluster's will be a Redis Streams queue shared by every kcached.
//
// Not thread-safe: JobManager calls it under its own lock.

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
