#pragma once
// Composes tiers, fastest first (memory -> RocksDB -> Redis).
//   get:  read-through; a hit in tier i is backfilled into tiers 0..i-1.
//   put:  the durable tier first (this node's disk: the one a restart reads
//         back); the put succeeds only if it took the value, and then the value
//         is written through to every other tier. When the durable tier fails
//         (full disk, I/O error) no other tier is written and its error is the
//         answer: an acknowledged write is never one a restart loses.
//   A tier that fails (down, timed out) on a read counts an error and is
//   treated as a miss: the caller never sees an error while any tier answers.
//   Failed writes are logged at warn with the tier and the reason.
// Its own counters are those events (absorbed tier errors, backfills); wrap it
// in a CountingStore for hits and misses, as make_tiered_store does.

#include <kcache/storage/store.h>

#include <memory>
#include <optional>
#include <vector>

namespace kcache::storage {

class TieredStore final : public Store {
public:
  // `durable_tier` indexes `tiers`; the last tier when not given.
  explicit TieredStore(std::vector<std::unique_ptr<Store>> tiers,
                       std::optional<std::size_t> durable_tier = std::nullopt);

  std::string name() const override { return "tiered"; }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  // The union over tiers; per key the largest size and latest access.
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  bool lists_by_seek() const override; // when every tier does
  // The tiers' own top lists, merged as list() merges an entry's rows
  // (merge_listed). Exact: every row is completed from the tiers whose top
  // it was not in, and the hits order (a sum over tiers) reads further until
  // no unread entry could still reach the page. kUnsupported when a tier
  // keeps no order.
  Result<TopList> list_top(const TopListOptions& options) override;
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override;
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;
  // As get() and get_many(): a hit is backfilled with put_shared, so the
  // memory tier keeps the very buffer a slower tier's read made.
  SharedGetResult get_shared(Area area, std::string_view key) override;
  std::vector<SharedGetResult> get_many_shared(Area area,
                                               std::span<const std::string> keys) override;
  CounterSnapshot counters() const override {
    return {.errors = absorbed_errors_.load(), .backfills = backfills_.load()};
  }

  std::size_t tier_count() const { return tiers_.size(); }
  const Store& tier(std::size_t i) const { return *tiers_.at(i); }
  Store& tier(std::size_t i) { return *tiers_.at(i); }
  std::size_t durable_tier() const { return durable_; }

private:
  void backfill(std::size_t below, Area area, std::string_view key, const Bytes& value);
  void backfill(std::size_t below, Area area, std::string_view key, const SharedBytes& value);
  // get/get_shared and get_many/get_many_shared, through `read` (one tier's get).
  template <typename R, typename Read> R read_through(Area area, std::string_view key, Read read);
  template <typename R, typename Read>
  std::vector<R> read_many_through(Area area, std::span<const std::string> keys, Read read);
  void note_tier_error(std::size_t tier, const StoreError& error);
  void note_put_error(std::size_t tier, Area area, std::string_view key, const StoreError& error);

  std::vector<std::unique_ptr<Store>> tiers_;
  std::size_t durable_ = 0;
  EventCounter absorbed_errors_; // a tier's failure answered as a miss
  EventCounter backfills_;
};

} // namespace kcache::storage
