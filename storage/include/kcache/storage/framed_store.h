#pragma once
// Decorator: frames every value on put (header, zstd, SHA-256) and verifies it
// on get. A value that fails verification is a miss, is deleted from the inner
// store and is counted; it never reaches a caller. Wraps every tier whose bytes
// leave the process (RocksDB, Redis).

#include <kcache/storage/store.h>
#include <kcache/storage/value_frame.h>

#include <memory>

namespace kcache::storage {

class FramedStore final : public Store {
public:
  explicit FramedStore(std::unique_ptr<Store> inner, FrameOptions options = {});

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
  // The inner store's counters, plus the values this decorator found corrupt:
  // those were hits for the inner store but misses for our callers.
  CounterSnapshot counters() const override;
  StoreUsage usage() const override { return inner_->usage(); }

  Store& inner() { return *inner_; }

private:
  GetResult verify(Area area, std::string_view key, GetResult framed);

  std::unique_ptr<Store> inner_;
  const FrameOptions options_;
  EventCounter corrupt_;
};

} // namespace kcache::storage
