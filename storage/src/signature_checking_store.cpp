#include <kcache/storage/signature_checking_store.h>

#include <spdlog/spdlog.h>

namespace kcache::storage {

namespace {

// Keys whose rejection was logged; beyond it, rejections are only counted.
constexpr std::size_t kMaxLoggedKeys = 10000;

} // namespace

std::uint64_t SignatureRejections::total() const {
  std::uint64_t sum = 0;
  for (const EventCounter& c : counts_) {
    sum += c.load();
  }
  return sum;
}

bool SignatureRejections::first_time(std::string_view key) {
  std::lock_guard lock(mu_);
  if (logged_.size() >= kMaxLoggedKeys) {
    return false;
  }
  return logged_.emplace(key).second;
}

SignatureCheckingStore::SignatureCheckingStore(std::unique_ptr<Store> inner, SignatureCheck check)
    : inner_(std::move(inner)), check_(std::move(check)) {
  if (!check_.rejections) {
    check_.rejections = std::make_shared<SignatureRejections>();
  }
  if (!check_.trusted) {
    check_.trusted = std::make_shared<const protocol::TrustedKeys>();
  }
}

GetResult SignatureCheckingStore::check(Area area, std::string_view key, GetResult got) {
  if (area != Area::kAction || !got || !got->has_value()) {
    return got;
  }
  auto verified = protocol::verify_record_json(key, **got, *check_.trusted);
  if (verified) {
    return got;
  }
  rejected_.add();
  check_.rejections->add(verified.error().failure);
  if (check_.rejections->first_time(key)) {
    spdlog::warn("{} tier: action record '{}' refused ({}): {}", inner_->name(), key,
                 protocol::failure_name(verified.error().failure), verified.error().message);
  }
  return std::optional<Bytes>{};
}

GetResult SignatureCheckingStore::get(Area area, std::string_view key) {
  return check(area, key, inner_->get(area, key));
}

std::vector<GetResult> SignatureCheckingStore::get_many(Area area,
                                                        std::span<const std::string> keys) {
  std::vector<GetResult> results = inner_->get_many(area, keys);
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i] = check(area, keys[i], std::move(results[i]));
  }
  return results;
}

Result<bool> SignatureCheckingStore::contains(Area area, std::string_view key) {
  if (area != Area::kAction) {
    return inner_->contains(area, key);
  }
  auto got = get(area, key);
  if (!got) {
    return tl::unexpected(got.error());
  }
  return got->has_value();
}

Result<void> SignatureCheckingStore::put(Area area, std::string_view key, std::string_view value) {
  return inner_->put(area, key, value);
}

Result<void> SignatureCheckingStore::remove(Area area, std::string_view key) {
  return inner_->remove(area, key);
}

Result<std::vector<ObjectInfo>> SignatureCheckingStore::list(const ListOptions& options) {
  return inner_->list(options);
}

CounterSnapshot SignatureCheckingStore::counters() const {
  CounterSnapshot c = inner_->counters();
  const std::uint64_t rejected = rejected_.load();
  c.hits -= std::min(c.hits, rejected);
  c.misses += rejected;
  return c;
}

} // namespace kcache::storage
