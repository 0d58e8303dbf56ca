#pragma once
// Per-store counters. Misses and errors are counted apart: a tier that is down
// must never look like a cold cache. CountingStore counts the outcome of every
// call; a tier itself reports only the events no caller can see (evictions,
// values it found corrupt, backfills, failures it absorbed).

#include <atomic>
#include <cstdint>
#include <optional>

namespace kcache::storage {

struct CounterSnapshot {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t errors = 0;
  std::uint64_t corrupt = 0; // values that failed verification (then deleted)
  std::uint64_t evictions = 0;
  std::uint64_t puts = 0;
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t backfills = 0; // tiered: copies into faster tiers
  std::uint64_t rejected = 0;  // calls refused without trying (open circuit breaker)
  std::uint64_t no_space = 0;  // writes refused for lack of disk space (also errors)

  friend CounterSnapshot operator+(const CounterSnapshot& a, const CounterSnapshot& b) {
    return {a.hits + b.hits,
            a.misses + b.misses,
            a.errors + b.errors,
            a.corrupt + b.corrupt,
            a.evictions + b.evictions,
            a.puts + b.puts,
            a.bytes_read + b.bytes_read,
            a.bytes_written + b.bytes_written,
            a.backfills + b.backfills,
            a.rejected + b.rejected,
            a.no_space + b.no_space};
  }
  friend bool operator==(const CounterSnapshot&, const CounterSnapshot&) = default;
};

// What a tier holds now (gauges, not counters), for /v1/stats and /metrics.
// Empty where the tier cannot say cheaply: Redis shares its memory with
// other users and has no capacity of ours.
struct StoreUsage {
  std::optional<std::uint64_t> bytes;    // as the tier accounts them against its capacity
  std::optional<std::uint64_t> capacity; // bytes
  std::optional<std::uint64_t> entries;  // both areas
};

// One event count, lock-free to bump on the hot path.
class EventCounter {
public:
  void add(std::uint64_t by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  std::uint64_t load() const { return value_.load(std::memory_order_relaxed); }

private:
  std::atomic<std::uint64_t> value_{0};
};

} // namespace kcache::storage
