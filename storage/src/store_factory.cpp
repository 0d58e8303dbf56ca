#include <kcache/storage/counting_store.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/tiered_store.h>

#include <array>
#include <optional>

namespace kcache::storage {
namespace {

std::unique_ptr<Store> counted(std::unique_ptr<Store> tier) {
  return std::make_unique<CountingStore>(std::move(tier));
}

// Persisted bytes leave the process: framed, over the count of what is stored.
std::unique_ptr<Store> framed(std::unique_ptr<Store> tier, const StoreLimits& limits) {
  FrameOptions options;
  options.max_raw_size = limits.max_value_bytes;
  return std::make_unique<FramedStore>(counted(std::move(tier)), options);
}

Result<std::unique_ptr<Store>> make_memory(const StoreUrl& url, const StoreLimits& /*limits*/) {
  auto options = parse_memory_url(url);
  if (!options) {
    return tl::unexpected(options.error());
  }
  return counted(std::make_unique<MemoryStore>(options->capacity_bytes));
}

Result<std::unique_ptr<Store>> make_rocksdb(const StoreUrl& url, const StoreLimits& limits) {
  auto options = parse_rocksdb_url(url);
  if (!options) {
    return tl::unexpected(options.error());
  }
  auto store = RocksDbStore::open(*options);
  if (!store) {
    return tl::unexpected(store.error());
  }
  return framed(std::move(*store), limits);
}

Result<std::unique_ptr<Store>> make_redis(const StoreUrl& url, const StoreLimits& limits) {
  auto options = parse_redis_url(url);
  if (!options) {
    return tl::unexpected(options.error());
  }
  return framed(std::make_unique<RedisStore>(std::move(*options)), limits);
}

struct Scheme {
  std::string_view name;
  Result<std::unique_ptr<Store>> (*make)(const StoreUrl&, const StoreLimits&);
};
constexpr std::array<Scheme, 3> kSchemes = {
    {{"memory", make_memory}, {"rocksdb", make_rocksdb}, {"redis", make_redis}}};

} // namespace

Result<std::unique_ptr<Store>> make_store(std::string_view text, const StoreLimits& limits) {
  auto url = StoreUrl::parse(text);
  if (!url) {
    return tl::unexpected(url.error());
  }
  std::string known;
  for (const Scheme& scheme : kSchemes) {
    if (scheme.name == url->scheme()) {
      return scheme.make(*url, limits);
    }
    known += (known.empty() ? "" : ", ") + std::string(scheme.name);
  }
  return tl::unexpected(StoreError{StoreError::Code::kInvalidArgument,
                                   "unknown store scheme '" + url->scheme() + "' (" + known + ")"});
}

Result<TieredStack> make_tiered_store(std::span<const std::string> urls, const StoreLimits& limits,
                                      const SignatureCheck* signatures) {
  if (urls.empty()) {
    return tl::unexpected(
        StoreError{StoreError::Code::kInvalidArgument, "a tiered store needs at least one tier"});
  }
  TieredStack stack;
  std::vector<std::unique_ptr<Store>> tiers;
  std::optional<std::size_t> durable; // the last RocksDB tier: this node's own disk
  for (const std::string& url : urls) {
    auto tier = make_store(url, limits);
    if (!tier) {
      return tl::unexpected(tier.error());
    }
    const std::string name = tier->get()->name();
    if (name == "rocksdb") {
      durable = tiers.size();
    }
    // The node's own tiers hold its own writes (and records verified when
    // they were backfilled); any other tier is shared.
    if (signatures != nullptr && name != "rocksdb" && name != "memory") {
      *tier = std::make_unique<SignatureCheckingStore>(std::move(*tier), *signatures);
    }
    stack.tiers.push_back(tier->get());
    tiers.push_back(std::move(*tier));
  }
  stack.store =
      counted(std::make_unique<TieredStore>(std::move(tiers), durable.value_or(urls.size() - 1)));
  return stack;
}

} // namespace kcache::storage
