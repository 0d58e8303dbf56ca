#include <kcache/storage/memory_store.h>

namespace kcache::storage {

MemoryStore::MemoryStore(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

std::string MemoryStore::index_key(Area area, std::string_view key) {
  std::string out(1, static_cast<char>(area));
  out.append(key);
  return out;
}

void MemoryStore::erase_locked(Lru::iterator it) {
  bytes_ -= it->value.size();
  if (const auto node = index_.find(index_key(it->area, it->key)); node != index_.end()) {
    ordered_.erase(node->first);
    index_.erase(node);
  }
  lru_.erase(it);
}

const MemoryStore::Entry* MemoryStore::touch_locked(Area area, std::string_view key) {
  const auto it = index_.find(index_key(area, key));
  if (it == index_.end()) {
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  it->second->last_access_ms = unix_now_ms();
  ++it->second->hits;
  return &*it->second;
}

GetResult MemoryStore::get(Area area, std::string_view key) {
  std::lock_guard lock(mu_);
  const Entry* e = touch_locked(area, key);
  return e == nullptr ? std::optional<Bytes>{} : std::optional<Bytes>{e->value.str()};
}

SharedGetResult MemoryStore::get_shared(Area area, std::string_view key) {
  std::lock_guard lock(mu_);
  const Entry* e = touch_locked(area, key);
  return e == nullptr ? std::optional<SharedBytes>{} : std::optional<SharedBytes>{e->value};
}

std::vector<SharedGetResult> MemoryStore::get_many_shared(Area area,
                                                          std::span<const std::string> keys) {
  std::vector<SharedGetResult> out;
  out.reserve(keys.size());
  std::lock_guard lock(mu_);
  for (const std::string& key : keys) {
    const Entry* e = touch_locked(area, key);
    out.emplace_back(e == nullptr ? std::optional<SharedBytes>{}
                                  : std::optional<SharedBytes>{e->value});
  }
  return out;
}

GetResult MemoryStore::peek(Area area, std::string_view key) {
  std::lock_guard lock(mu_);
  const auto it = index_.find(index_key(area, key));
  if (it == index_.end()) {
    return std::optional<Bytes>{};
  }
  return std::optional<Bytes>{it->second->value.str()};
}

namespace {

// Larger than the whole tier: keeping it would evict everything else.
StoreError too_large(std::size_t size) {
  return StoreError{StoreError::Code::kTooLarge,
                    "value of " + std::to_string(size) + " bytes exceeds the memory tier capacity"};
}

} // namespace

Result<void> MemoryStore::put(Area area, std::string_view key, std::string_view value) {
  if (value.size() > capacity_) {
    return tl::unexpected(too_large(value.size())); // before the copy
  }
  return put_shared(area, key, SharedBytes(Bytes(value)));
}

Result<void> MemoryStore::put_shared(Area area, std::string_view key, const SharedBytes& value) {
  if (value.size() > capacity_) {
    return tl::unexpected(too_large(value.size()));
  }
  std::lock_guard lock(mu_);
  if (const auto it = index_.find(index_key(area, key)); it != index_.end()) {
    erase_locked(it->second);
  }
  while (!lru_.empty() && bytes_ + value.size() > capacity_) {
    erase_locked(std::prev(lru_.end()));
    evictions_.add();
  }
  const std::int64_t now = unix_now_ms();
  lru_.push_front(Entry{area, std::string(key), value, now, now, 0});
  const auto node = index_.emplace(index_key(area, key), lru_.begin()).first;
  ordered_.emplace(node->first, lru_.begin());
  bytes_ += value.size();
  return {};
}

Result<bool> MemoryStore::contains(Area area, std::string_view key) {
  std::lock_guard lock(mu_);
  return index_.count(index_key(area, key)) > 0;
}

Result<void> MemoryStore::remove(Area area, std::string_view key) {
  std::lock_guard lock(mu_);
  if (const auto it = index_.find(index_key(area, key)); it != index_.end()) {
    erase_locked(it->second);
  }
  return {};
}

Result<std::vector<ObjectInfo>> MemoryStore::list(const ListOptions& options) {
  std::lock_guard lock(mu_);
  std::vector<ObjectInfo> out;
  for (const Area area : {Area::kAction, Area::kCas}) {
    if ((options.area && *options.area != area) || (options.after && options.after->area > area)) {
      continue;
    }
    // A seek to the prefix, or past the cursor when it lies beyond it.
    const std::string start = index_key(area, options.prefix);
    auto it = ordered_.lower_bound(start);
    if (options.after && options.after->area == area) {
      if (const std::string after = index_key(area, options.after->key); after >= start) {
        it = ordered_.upper_bound(after);
      }
    }
    for (; it != ordered_.end() && out.size() < options.limit && it->first.starts_with(start);
         ++it) {
      const Entry& e = *it->second;
      out.push_back(
          ObjectInfo{e.area, e.key, e.value.size(), e.created_ms, e.last_access_ms, e.hits});
    }
  }
  return out;
}

std::uint64_t MemoryStore::size_bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

StoreUsage MemoryStore::usage() const {
  std::lock_guard lock(mu_);
  return {bytes_, capacity_, lru_.size()};
}

} // namespace kcache::storage
