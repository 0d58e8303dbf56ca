#pragma once
// In-process tier: a byte-bounded LRU. Holds raw (verified) values, so it
// carries no frame. Thread-safe. Each value is an immutable shared buffer:
// get_shared() hands it out without a copy (an evicted value lives on while
// a reader still holds it); get() copies it.

#include <kcache/storage/store.h>

#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

namespace kcache::storage {

class StoreUrl;

struct MemoryOptions {
  std::uint64_t capacity_bytes = 256ULL << 20;
};
// memory://?capacity=256MiB
Result<MemoryOptions> parse_memory_url(const StoreUrl& url);

class MemoryStore final : public Store {
public:
  explicit MemoryStore(std::uint64_t capacity_bytes);

  std::string name() const override { return "memory"; }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  SharedGetResult get_shared(Area area, std::string_view key) override;
  std::vector<SharedGetResult> get_many_shared(Area area,
                                               std::span<const std::string> keys) override;
  Result<void> put_shared(Area area, std::string_view key, const SharedBytes& value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  // Last access walks the LRU list from its front; the other orders read
  // every entry (the tier is bounded by its capacity).
  Result<TopList> list_top(const TopListOptions& options) override;
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override;
  CounterSnapshot counters() const override { return {.evictions = evictions_.load()}; }
  StoreUsage usage() const override;

  std::uint64_t size_bytes() const;
  std::uint64_t capacity_bytes() const { return capacity_; }

private:
  struct Entry {
    Area area;
    std::string key;
    SharedBytes value;
    std::int64_t created_ms;
    std::int64_t last_access_ms;
    std::uint64_t hits = 0;
  };
  using Lru = std::list<Entry>; // front = most recently used

  static std::string index_key(Area area, std::string_view key);
  void erase_locked(Lru::iterator it);
  // Now in unix ms for a read or put, at least the LRU front's time.
  std::int64_t stamp_locked() const;
  std::size_t entries_of(std::optional<Area> area) const {
    return area ? entries_[static_cast<std::size_t>(*area)] : entries_[0] + entries_[1];
  }
  // The entry read (moved to the front, its hit counted); null on a miss.
  const Entry* touch_locked(Area area, std::string_view key);

  const std::uint64_t capacity_;
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> index_;
  // index_'s keys in order (views of them: its nodes do not move), for
  // listings that seek (a page after a cursor); lookups stay on index_.
  std::map<std::string_view, Lru::iterator> ordered_;
  std::uint64_t bytes_ = 0;
  std::size_t entries_[2] = {0, 0}; // per Area
  EventCounter evictions_;
};

} // namespace kcache::storage
