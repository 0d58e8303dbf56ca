#pragma once
// Decorator, in Buildbarn's style: action records read from the tier it wraps
// (a shared tier: Redis, any store other nodes and other clients can write)
// are served only with a valid signature by a trusted key
// (protocol/record_signature.h). Anything else is a miss, counted per reason
// and logged once per key; it is never deleted (a genuine entry by a node this
// one does not trust belongs to those that do). CAS blobs pass through: they
// are bound to their digest by FramedStore.
//
// Only the shared tier is wrapped: a verified record is backfilled into the
// local tiers (memory, RocksDB), whose later hits cost no signature check.

#include <kcache/protocol/record_signature.h>
#include <kcache/protocol/verified_signature_cache.h>
#include <kcache/storage/store.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

namespace kcache::storage {

// Rejections by reason, shared by every checked tier of a daemon (one metric).
class SignatureRejections {
public:
  void add(protocol::SignatureFailure failure) { counts_[index(failure)].add(); }
  std::uint64_t count(protocol::SignatureFailure failure) const {
    return counts_[index(failure)].load();
  }
  std::uint64_t total() const;

  // True the first time `key` is seen: a flood of forged entries (or one key
  // asked for in a loop) logs each key once. Remembers a bounded number.
  bool first_time(std::string_view key);

private:
  static std::size_t index(protocol::SignatureFailure f) { return static_cast<std::size_t>(f); }
  std::array<EventCounter, protocol::kSignatureFailureCount> counts_;
  std::mutex mu_;
  std::unordered_set<std::string> logged_;
};

struct SignatureCheck {
  std::shared_ptr<const protocol::TrustedKeys> trusted;
  std::shared_ptr<SignatureRejections> rejections;
  // Records already verified in this process (re-read from the shared tier:
  // after a local eviction, by contains() then get()); shared by every
  // checked tier of a daemon, cleared with a new trusted set. A store makes
  // its own when this is null.
  std::shared_ptr<protocol::VerifiedSignatureCache> verified;
};

class SignatureCheckingStore final : public Store {
public:
  SignatureCheckingStore(std::unique_ptr<Store> inner, SignatureCheck check);

  std::string name() const override { return inner_->name(); }
  GetResult get(Area area, std::string_view key) override;
  GetResult peek(Area area, std::string_view key) override;
  Result<void> put(Area area, std::string_view key, std::string_view value) override;
  // An action record is there only if it would be served: get and verify.
  Result<bool> contains(Area area, std::string_view key) override;
  Result<void> remove(Area area, std::string_view key) override;
  // With options.servable_only, without the action records get() would
  // refuse (read and verified here).
  Result<std::vector<ObjectInfo>> list(const ListOptions& options) override;
  bool lists_by_seek() const override { return inner_->lists_by_seek(); }
  // With servable_only, the first `limit` servable entries: the inner
  // store's, read further while refused ones leave the page short.
  Result<TopList> list_top(const TopListOptions& options) override;
  Result<std::vector<std::optional<ObjectInfo>>>
  describe(std::span<const ListCursor> entries) override {
    return inner_->describe(entries);
  }
  std::vector<GetResult> get_many(Area area, std::span<const std::string> keys) override;
  // The inner store's counters; a rejected record was a hit for the inner
  // tier but is a miss for our callers.
  CounterSnapshot counters() const override;
  StoreUsage usage() const override { return inner_->usage(); }

  Store& inner() { return *inner_; }

private:
  GetResult check(Area area, std::string_view key, GetResult got);
  // What list() keeps of a page the inner store listed.
  struct Servable {
    std::vector<ObjectInfo> infos;  // the servable ones
    std::size_t read = 0;           // entries the inner store listed
    std::optional<ListCursor> last; // the last of them
  };
  Result<Servable> servable(std::vector<ObjectInfo> listed);

  std::unique_ptr<Store> inner_;
  SignatureCheck check_;
  EventCounter rejected_;
};

} // namespace kcache::storage
