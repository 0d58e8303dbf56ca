#pragma once
// The listing index of the Redis tier: Redis keeps no order, so without it a
// page of `kcache ls` or of the dashboard SCANs the whole keyspace (minutes at
// a million entries). Per area, three sorted sets hold every entry's key:
//   key    score 0, so the set sorts by key (ZRANGEBYLEX): key-order pages;
//   size   score -size: largest first, ties by key;
//   access score -last access (ms): most recently read first.
// Created and hits are not kept (Redis rows report 0 for both, as before), so
// those orders are key order. All sets of a namespace share one hash tag: in
// a cluster they live on one node and one pipeline reaches them.
//
// The sets are kept beside the values, not with them, so they can hold keys
// whose values are gone (expired by TTL, evicted by maxmemory, removed by a
// concurrent writer). Every listing checks the rows it returns and drops such
// keys from the sets; puts also trim the least recently read end of the
// access set now and then, which is where TTL and LRU evict from, so the sets
// stay about as large as what is stored (about 3 x 100 bytes per entry).
// Reads are recorded in memory and written to the access set in batches
// (ZADD XX LT): a hit costs no extra round trip.
//
// Internal to RedisStore.

#include <kcache/storage/redis_client.h>
#include <kcache/storage/store.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::storage::detail {

// "<ns>:<ac|cas>:<key>", where a value lives.
std::string redis_value_key(std::string_view ns, Area area, std::string_view key);

class RedisOrderIndex {
public:
  using Routed = std::vector<std::pair<std::string, RedisCommand>>;

  RedisOrderIndex(RedisClient& client, std::string ns);
  ~RedisOrderIndex(); // writes the reads still waiting
  RedisOrderIndex(const RedisOrderIndex&) = delete;
  RedisOrderIndex& operator=(const RedisOrderIndex&) = delete;

  // The commands that index an entry just stored (after its SET, so a
  // listing that finds the key in the index finds its value too), and that
  // drop a removed one.
  Routed index_commands(Area area, std::string_view key, std::uint64_t size,
                        std::int64_t now_ms) const;
  Routed unindex_commands(Area area, std::string_view key) const;

  // Records a read; written with the next batch (at most a second later, or
  // once 256 are waiting, or before a listing).
  void record_read(Area area, std::string_view key, std::int64_t now_ms);
  // Checks the least recently read keys of each area, at most every 10 s,
  // and drops those whose values are gone. Failures are left for next time.
  void trim_if_due();

  // Store::list, list_top and describe from the sets. Each builds the index
  // first when the namespace has none (a store written before it, or sets
  // Redis dropped): a SCAN of the keyspace, once.
  Result<std::vector<ObjectInfo>> list(const ListOptions& options);
  Result<TopList> list_top(const TopListOptions& options);
  Result<std::vector<std::optional<ObjectInfo>>> describe(std::span<const ListCursor> entries);

private:
  enum class Set : std::uint8_t { kKey, kSize, kAccess };
  std::string set_key(Area area, Set set) const;
  std::string built_key() const;

  Result<void> prepare(); // flushes recorded reads, builds the index if missing
  Result<void> build();
  Result<void> flush_reads();
  // Listing rows of `keys` (nullopt: the value is gone, and the key is dropped
  // from the sets).
  struct Rows {
    std::vector<std::optional<ObjectInfo>> rows;
    bool gone_dropped = true; // the gone keys are out of the sets now
  };
  Result<Rows> rows(Area area, std::span<const std::string> keys);
  // Up to `limit` live rows of one area in the order of `set`, by rank.
  Result<std::vector<ObjectInfo>> first_rows(Area area, Set set, std::size_t limit);
  // Live rows of one area in key order from `start` (a ZRANGEBYLEX bound)
  // below `stop`, at most `limit`.
  Result<std::vector<ObjectInfo>> key_range(Area area, std::string start, const std::string& stop,
                                            std::size_t limit);

  RedisClient& client_;
  const std::string ns_;
  const std::string tag_; // "{<ns>}": every set of the namespace in one slot

  std::mutex reads_mu_;
  std::map<std::pair<Area, std::string>, std::int64_t> reads_; // newest read per entry
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> next_trim_ms_{0}; // steady clock, ms
};

} // namespace kcache::storage::detail
