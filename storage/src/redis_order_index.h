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
// writer from before the index). Every listing checks the rows it returns and
// drops such keys; every 2 s a put also checks where values go without a
// remove: the least recently read (LRU eviction), the oldest stored (a TTL:
// a fourth set by put time, kept only then) and a window that walks the
// whole access set. A key dropped while a put of it ran is put back (see
// drop_unless_stored). Reads are recorded in memory and written to the access
// set in batches (ZADD XX LT): a hit costs no extra round trip.
// Needs Redis 6.2 or later (ZADD LT, ZMSCORE).
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

  // `ttl`: the values' TTL, if they have one (RedisOptions::ttl).
  RedisOrderIndex(RedisClient& client, std::string ns, std::optional<std::chrono::seconds> ttl);
  ~RedisOrderIndex(); // writes the reads still waiting
  RedisOrderIndex(const RedisOrderIndex&) = delete;
  RedisOrderIndex& operator=(const RedisOrderIndex&) = delete;

  // The commands that index an entry just stored (after its SET, so a
  // listing that finds the key in the index finds its value too), and that
  // drop a removed one.
  Routed index_commands(Area area, std::string_view key, std::uint64_t size,
                        std::int64_t now_ms) const;
  // Index commands that failed (the value is stored): kept and sent again
  // with the next trim, up to ~10,000 entries' worth; past that the built
  // mark is deleted instead, so the next listing indexes the namespace
  // again. Logged once per failing spell; index_written() ends the spell.
  void index_failed(Routed commands, std::string_view why);
  void index_written();
  // Drops `keys` from the sets (a remove, or values found gone), then puts
  // back those whose value is stored after all (a put that raced the drop).
  // False when some of it could not be done.
  bool drop_unless_stored(Area area, std::span<const std::string> keys);

  // Records a read; written with the next batch (at most a second later, or
  // once 256 are waiting, or before a listing).
  void record_read(Area area, std::string_view key, std::int64_t now_ms);
  // At most every 2 s: sends failed index writes again, checks the keys
  // where values go without a remove (above) and drops those whose values
  // are gone. Failures wait for the next turn.
  void trim_if_due();

  // Store::list, list_top and describe from the sets. A listing builds the
  // index first when the namespace has no built mark (a store written before
  // it, a mark Redis evicted, a put whose index write failed): a SCAN of the
  // keyspace, one at a time per process and per namespace (the others answer
  // kUnavailable meanwhile).
  Result<std::vector<ObjectInfo>> list(const ListOptions& options);
  Result<TopList> list_top(const TopListOptions& options);
  Result<std::vector<std::optional<ObjectInfo>>> describe(std::span<const ListCursor> entries);

private:
  // kStored (put time) only with a TTL: where trim_if_due finds what expired.
  enum class Set : std::uint8_t { kKey, kSize, kAccess, kStored };
  std::string set_key(Area area, Set set) const;
  std::string built_key() const;
  std::vector<Set> sets() const; // the sets kept
  Result<bool> is_built();
  void retry_failed_writes();

  Result<void> prepare(); // flushes recorded reads, builds the index if missing
  Result<void> build();
  Result<void> flush_reads();
  // Listing rows of `keys` (nullopt: the value is gone, and the key is dropped
  // from the sets).
  struct Rows {
    std::vector<std::optional<ObjectInfo>> rows;
    std::size_t gone = 0;     // keys whose values are gone
    bool gone_dropped = true; // ... and are out of the sets now
  };
  Result<Rows> rows(Area area, std::span<const std::string> keys);
  // One round of a listing: the keys a range command answers, and their rows.
  struct Round : Rows {
    std::vector<std::string> keys;
  };
  Result<Round> round_of(Area area, RedisCommand range);
  // Up to `limit` live rows of one area in the order of `set`, by rank.
  Result<std::vector<ObjectInfo>> first_rows(Area area, Set set, std::size_t limit);
  // Live rows of one area in key order from `start` (a ZRANGEBYLEX bound)
  // below `stop`, at most `limit`.
  Result<std::vector<ObjectInfo>> key_range(Area area, std::string start, const std::string& stop,
                                            std::size_t limit);

  RedisClient& client_;
  const std::string ns_;
  const std::string tag_; // "{<ns>}": every set of the namespace in one slot
  const std::optional<std::chrono::seconds> ttl_;
  std::mutex build_mu_;                    // one build per process
  std::atomic<bool> index_failing_{false}; // logged once per spell
  std::mutex retry_mu_;
  Routed retry_; // index writes that failed, sent again by trim_if_due
  bool retry_overflowed_ = false;
  std::atomic<long> sweep_rank_{0}; // NOLINT(google-runtime-int): trim's walking window

  std::mutex reads_mu_;
  std::map<std::pair<Area, std::string>, std::int64_t> reads_; // newest read per entry
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> next_trim_ms_{0}; // steady clock, ms
};

} // namespace kcache::storage::detail
