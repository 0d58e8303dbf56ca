#include <kcache/storage/framed_store.h>

#include <spdlog/spdlog.h>

namespace kcache::storage {

FramedStore::FramedStore(std::unique_ptr<Store> inner, FrameOptions options)
    : inner_(std::move(inner)), options_(options) {}

GetResult FramedStore::verify(Area area, std::string_view key, GetResult framed) {
  if (!framed || !framed->has_value()) {
    return framed;
  }
  // A CAS key is the content's SHA-256: bind the two, so that a self-consistent
  // frame stored under another blob's name (a shared tier) is refused.
  const auto cas_digest = area == Area::kCas ? cachekey::digest_from_hex(key) : std::nullopt;
  auto raw = decode_frame(**framed, cas_digest ? &*cas_digest : nullptr, options_.max_raw_size);
  if (raw) {
    return std::optional<Bytes>{std::move(*raw)};
  }
  corrupt_.add();
  spdlog::warn("{} tier: {} entry '{}' deleted: {}", inner_->name(), area_name(area), key,
               raw.error().message);
  if (auto removed = inner_->remove(area, key); !removed) {
    spdlog::warn("{} tier: could not delete corrupt entry: {}", inner_->name(),
                 removed.error().message);
  }
  return std::optional<Bytes>{};
}

GetResult FramedStore::get(Area area, std::string_view key) {
  return verify(area, key, inner_->get(area, key));
}

GetResult FramedStore::peek(Area area, std::string_view key) {
  return verify(area, key, inner_->peek(area, key));
}

std::vector<GetResult> FramedStore::get_many(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> results = inner_->get_many(area, keys);
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i] = verify(area, keys[i], std::move(results[i]));
  }
  return results;
}

Result<void> FramedStore::put(Area area, std::string_view key, std::string_view value) {
  // What could not be read back is not written.
  if (value.size() > options_.max_raw_size) {
    return tl::unexpected(
        StoreError{StoreError::Code::kTooLarge, "value of " + std::to_string(value.size()) +
                                                    " bytes is over the store's maximum of " +
                                                    std::to_string(options_.max_raw_size)});
  }
  return inner_->put(area, key, encode_frame(value, options_));
}

Result<bool> FramedStore::contains(Area area, std::string_view key) {
  return inner_->contains(area, key);
}

Result<void> FramedStore::remove(Area area, std::string_view key) {
  return inner_->remove(area, key);
}

Result<std::vector<ObjectInfo>> FramedStore::list(const ListOptions& options) {
  return inner_->list(options);
}

CounterSnapshot FramedStore::counters() const {
  CounterSnapshot c = inner_->counters();
  const std::uint64_t corrupt = corrupt_.load();
  c.corrupt += corrupt;
  // A corrupt value was a hit for the inner tier but a miss for our callers.
  c.hits -= std::min(c.hits, corrupt);
  c.misses += corrupt;
  return c;
}

} // namespace kcache::storage
