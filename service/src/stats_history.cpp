#include <kcache/service/stats_history.h>

#include <algorithm>

namespace kcache::service {

namespace {

// A counter that went down (a store replaced) counts nothing, not 2^64.
std::uint64_t grown(std::uint64_t now, std::uint64_t before) {
  return now > before ? now - before : 0;
}

} // namespace

StatsHistory::StatsHistory(std::size_t minutes) : slots_(std::max<std::size_t>(minutes, 1)) {
  for (MinuteCounts& slot : slots_) {
    slot.minute = -1;
  }
}

std::int64_t StatsHistory::minute_of(std::int64_t ms) {
  return ms < 0 ? 0 : ms / 60'000;
}

bool StatsHistory::due(std::int64_t now_ms) const {
  return minute_of(now_ms) != last_minute_.load(std::memory_order_relaxed);
}

void StatsHistory::record(std::int64_t now_ms, const storage::CounterSnapshot& counters) {
  std::lock_guard lock(mu_);
  record_locked(minute_of(now_ms), counters);
}

void StatsHistory::record_locked(std::int64_t minute, const storage::CounterSnapshot& counters) {
  const std::int64_t last = last_minute_.load(std::memory_order_relaxed);
  if (started_ && last >= 0) {
    MinuteCounts& slot = slots_[static_cast<std::size_t>(last) % slots_.size()];
    if (slot.minute != last) {
      slot = MinuteCounts{.minute = last};
    }
    slot.hits += grown(counters.hits, last_.hits);
    slot.misses += grown(counters.misses, last_.misses);
    slot.errors += grown(counters.errors, last_.errors);
    slot.puts += grown(counters.puts, last_.puts);
    slot.bytes_served += grown(counters.bytes_read, last_.bytes_read);
  }
  started_ = true;
  last_ = counters;
  // A clock that steps back keeps counting into the later minute.
  last_minute_.store(std::max(last, minute), std::memory_order_relaxed);
}

std::vector<MinuteCounts> StatsHistory::series(std::int64_t now_ms,
                                               const storage::CounterSnapshot& counters,
                                               std::size_t minutes) {
  std::lock_guard lock(mu_);
  const std::int64_t now = minute_of(now_ms);
  record_locked(now, counters);
  minutes = std::min(minutes, slots_.size());
  std::vector<MinuteCounts> out;
  out.reserve(minutes);
  for (std::int64_t m = now - static_cast<std::int64_t>(minutes) + 1; m <= now; ++m) {
    const MinuteCounts* slot =
        m >= 0 ? &slots_[static_cast<std::size_t>(m) % slots_.size()] : nullptr;
    out.push_back(slot != nullptr && slot->minute == m ? *slot : MinuteCounts{.minute = m});
  }
  return out;
}

} // namespace kcache::service
