#pragma once
// Per-minute counters for the dashboard: hits, misses, errors, puts and bytes
// served in each of the last 24 h, in a fixed ring of 1440 slots. It holds no
// counters of its own: it is fed snapshots of the store's counters (the ones
// /v1/stats reports) and keeps their differences, so the two never disagree.
// Time is passed in (unix ms), never read here: tests drive the clock.

#include <kcache/storage/store_counters.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kcache::service {

struct MinuteCounts {
  std::int64_t minute = 0; // unix time / 60 s
  std::uint64_t hits = 0, misses = 0, errors = 0, puts = 0, bytes_served = 0;
};

class StatsHistory {
public:
  static constexpr std::size_t kDefaultMinutes = 1440;

  explicit StatsHistory(std::size_t minutes = kDefaultMinutes);

  // True when `now_ms` is in another minute than the last record(): the hot
  // path calls record() only then (one atomic load per request otherwise).
  bool due(std::int64_t now_ms) const;
  // What changed since the last record() is counted in the minute of that
  // last record(): requests record() before they count, so a minute's
  // activity lands in it. The first call only sets the baseline.
  void record(std::int64_t now_ms, const storage::CounterSnapshot& counters);
  // The last `minutes` minutes up to now_ms's, oldest first, one row per
  // minute (zeros where nothing happened or before the ring's reach).
  // Records `counters` first, so the current minute is up to date.
  std::vector<MinuteCounts> series(std::int64_t now_ms, const storage::CounterSnapshot& counters,
                                   std::size_t minutes);

  std::size_t capacity() const { return slots_.size(); }

private:
  static std::int64_t minute_of(std::int64_t ms);
  void record_locked(std::int64_t minute, const storage::CounterSnapshot& counters);

  std::mutex mu_;
  std::vector<MinuteCounts> slots_; // slot minute % size; stale when its minute differs
  std::atomic<std::int64_t> last_minute_{-1};
  bool started_ = false;
  storage::CounterSnapshot last_; // the counters at the last record()
};

} // namespace kcache::service
