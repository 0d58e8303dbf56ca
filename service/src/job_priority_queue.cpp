#include <kcache/service/job_priority_queue.h>

#include <iterator>

namespace kcache::service {

bool JobPriorityQueue::push(const std::string& id, int priority, bool force) {
  if ((!force && entries_.size() >= capacity_) || by_id_.contains(id)) {
    return false;
  }
  const auto [it, inserted] = entries_.insert(Entry{priority, next_sequence_++, id});
  by_id_.emplace(id, it);
  return inserted;
}

std::optional<std::string> JobPriorityQueue::pop() {
  if (entries_.empty()) {
    return std::nullopt;
  }
  std::string id = entries_.begin()->id;
  by_id_.erase(id);
  entries_.erase(entries_.begin());
  return id;
}

bool JobPriorityQueue::remove(const std::string& id) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return false;
  }
  entries_.erase(it->second);
  by_id_.erase(it);
  return true;
}

std::optional<std::size_t> JobPriorityQueue::position(const std::string& id) const {
  const auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::distance(entries_.begin(), it->second));
}

} // namespace kcache::service
