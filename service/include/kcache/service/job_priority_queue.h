#pragma once
// The order of jobs waiting for a worker: highest priority first, first come
// first served within a priority, bounded (a full queue answers "busy" rather
// than growing without limit). Not thread-safe: its owner (LocalJobQueue)
// is guarded by JobManager's lock.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace kcache::service {

class JobPriorityQueue {
public:
  explicit JobPriorityQueue(std::size_t capacity) : capacity_(capacity) {}

  // False when full, unless `force` (jobs resumed from the journal are never dropped).
  bool push(const std::string& id, int priority, bool force = false);
  std::optional<std::string> pop();
  bool remove(const std::string& id);
  // 0-based place in line, or nullopt when not queued.
  std::optional<std::size_t> position(const std::string& id) const;
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }

private:
  struct Entry {
    int priority;
    std::uint64_t sequence;
    std::string id;
    bool operator<(const Entry& other) const {
      if (priority != other.priority) {
        return priority > other.priority;
      }
      return sequence < other.sequence;
    }
  };
  std::size_t capacity_;
  std::uint64_t next_sequence_ = 0;
  std::set<Entry> entries_;
  std::unordered_map<std::string, std::set<Entry>::iterator> by_id_;
};

} // namespace kcache::service
