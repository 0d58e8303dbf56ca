#pragma once
// A fault-injecting test double over a real store (a MemoryStore unless
// given one): fail the next N gets or puts, add latency to every call, or take
// the whole store down (an outage: every call fails as an unreachable tier
// would). Lets TieredStore and CountingStore be tested without a redis-server.

#include <kcache/storage/memory_store.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace kcache::testing {

class FaultyStore final : public storage::Store {
public:
  using Area = storage::Area;
  using StoreError = storage::StoreError;
  template <typename T> using Result = storage::Result<T>;

  explicit FaultyStore(
      std::string name = "faulty",
      std::unique_ptr<storage::Store> inner = std::make_unique<storage::MemoryStore>(64ULL << 20))
      : name_(std::move(name)), inner_(std::move(inner)) {}

  void fail_next_gets(int n, StoreError::Code code = StoreError::Code::kUnavailable) {
    fail_gets_ = n;
    code_ = code;
  }
  void fail_next_puts(int n, StoreError::Code code = StoreError::Code::kUnavailable) {
    fail_puts_ = n;
    code_ = code;
  }
  void set_latency(std::chrono::milliseconds latency) { latency_ = latency; }
  void set_outage(bool down) { outage_ = down; }
  // A breaker that is open: calls are refused without trying.
  void set_rejecting(bool rejecting) { rejecting_ = rejecting; }

  int gets() const { return gets_; }
  int puts() const { return puts_; }
  storage::Store& inner() { return *inner_; }

  std::string name() const override { return name_; }
  storage::GetResult get(Area area, std::string_view key) override {
    ++gets_;
    if (auto fault = injected(&fail_gets_)) {
      return tl::unexpected(*fault);
    }
    return inner_->get(area, key);
  }
  Result<void> put(Area area, std::string_view key, std::string_view value) override {
    ++puts_;
    if (auto fault = injected(&fail_puts_)) {
      return tl::unexpected(*fault);
    }
    return inner_->put(area, key, value);
  }
  Result<bool> contains(Area area, std::string_view key) override {
    if (auto fault = injected()) {
      return tl::unexpected(*fault);
    }
    return inner_->contains(area, key);
  }
  Result<void> remove(Area area, std::string_view key) override {
    if (auto fault = injected()) {
      return tl::unexpected(*fault);
    }
    return inner_->remove(area, key);
  }
  Result<std::vector<storage::ObjectInfo>> list(const storage::ListOptions& options) override {
    if (auto fault = injected()) {
      return tl::unexpected(*fault);
    }
    return inner_->list(options);
  }
  storage::CounterSnapshot counters() const override { return inner_->counters(); }

private:
  // The fault this call meets, if any; a one-shot budget is spent by it.
  std::optional<StoreError> injected(std::atomic<int>* budget = nullptr) {
    if (latency_.load().count() > 0) {
      std::this_thread::sleep_for(latency_.load());
    }
    if (rejecting_) {
      return StoreError{StoreError::Code::kUnavailable, name_ + ": circuit open", true};
    }
    if (outage_) {
      return StoreError{StoreError::Code::kUnavailable, name_ + ": down (injected)"};
    }
    if (budget != nullptr && budget->load() > 0) {
      --*budget;
      return StoreError{code_, name_ + ": failed (injected)"};
    }
    return std::nullopt;
  }

  const std::string name_;
  std::unique_ptr<storage::Store> inner_;
  std::atomic<int> fail_gets_{0};
  std::atomic<int> fail_puts_{0};
  std::atomic<StoreError::Code> code_{StoreError::Code::kUnavailable};
  std::atomic<std::chrono::milliseconds> latency_{std::chrono::milliseconds(0)};
  std::atomic<bool> outage_{false};
  std::atomic<bool> rejecting_{false};
  std::atomic<int> gets_{0};
  std::atomic<int> puts_{0};
};

} // namespace kcache::testing
