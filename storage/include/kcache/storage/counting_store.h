#pragma once
// Decorator: counts the outcome of every call on the store it wraps (hits,
// misses, errors, refusals, bytes), as Buildbarn's MetricsBlobAccess does, so
// the tiers themselves carry no counting. Its counters() add the inner store's
// own events (evictions, corrupt values, backfills).
//
// Outcomes: a get answering a value is a hit, an empty answer a miss. An error
// is counted as `rejected` when the tier refused without trying (open breaker,
// or a node that did not answer earlier in the request),
// not at all when it is kTooLarge (a tier's size policy, not a failure), and as
// an error otherwise; a kNoSpace error is also counted as `no_space`. Batch
// reads count per key.

#include <kcache/storage/store.h>

#include <memory>

namespace kcache::storage {

class CountingStore final : public Store {
public:
  explicit CountingStore(std::unique_ptr<Store> inner);

  std::string name() const override { return inner_->name(); }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  bool lists_by_seek() const override { return inner_->lists_by_seek(); }
  Result<TopList> list_top(const TopListOptions& options) override {
    return inner_->list_top(options);
  }
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override {
    return inner_->describe(entries);
  }
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;
  SharedGetResult get_shared(Area area, std::string_view key) override;
  std::vector<SharedGetResult> get_many_shared(Area area,
                                               std::span<const std::string> keys) override;
  Result<void> put_shared(Area area, std::string_view key, const SharedBytes& value) override;
  CounterSnapshot counters() const override;
  StoreUsage usage() const override { return inner_->usage(); }

  Store& inner() { return *inner_; }
  const Store& inner() const { return *inner_; }

private:
  template <typename R> void count_get(const R& result);
  void count_put(const Result<void>& result, std::size_t bytes);
  void count_error(const StoreError& error);

  std::unique_ptr<Store> inner_;
  EventCounter hits_;
  EventCounter misses_;
  EventCounter errors_;
  EventCounter rejected_;
  EventCounter no_space_;
  EventCounter puts_;
  EventCounter bytes_read_;
  EventCounter bytes_written_;
};

} // namespace kcache::storage
