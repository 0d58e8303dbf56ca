#pragma once
// Per-store counters, lock-free to bump on the hot path. Misses and errors are
// counted apart: a tier that is down must never look like a cold cache.

#include <atomic>
#include <cstdint>

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
};

struct StoreCounters {
  std::atomic<std::uint64_t> hits{0};
  std::atomic<std::uint64_t> misses{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> corrupt{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> puts{0};
  std::atomic<std::uint64_t> bytes_read{0};
  std::atomic<std::uint64_t> bytes_written{0};
  std::atomic<std::uint64_t> backfills{0};
  std::atomic<std::uint64_t> rejected{0};

  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) {
    counter.fetch_add(by, std::memory_order_relaxed);
  }

  CounterSnapshot snapshot() const {
    auto load = [](const std::atomic<std::uint64_t>& c) {
      return c.load(std::memory_order_relaxed);
    };
    return CounterSnapshot{load(hits),      load(misses),  load(errors),     load(corrupt),
                           load(evictions), load(puts),    load(bytes_read), load(bytes_written),
                           load(backfills), load(rejected)};
  }
};

} // namespace kcache::storage
