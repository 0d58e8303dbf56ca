#include <kcache/storage/memory_store.h>

#include <algorithm>

namespace kcache::storage {

MemoryStore::MemoryStore(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

std::string MemoryStore::index_key(Area area, std::string_view key) {
  std::string out(1, static_cast<char>(area));
  out.append(key);
  return out;
}

void MemoryStore::erase_locked(Lru::iterator it) {
  bytes_ -= it->value.size();
  --entries_[static_cast<std::size_t>(it->area)];
  if (const auto node = index_.find(index_key(it->area, it->key)); node != index_.end()) {
    ordered_.erase(node->first);
    index_.erase(node);
  }
  lru_.erase(it);
}

std::int64_t MemoryStore::stamp_locked() const {
  // Never before the front's: the LRU list stays in last-access order when
  // the wall clock steps back, as list_top's walk from the front needs.
  const std::int64_t now = unix_now_ms();
  return lru_.empty() ? now : std::max(now, lru_.front().last_access_ms);
}

const MemoryStore::Entry* MemoryStore::touch_locked(Area area, std::string_view key) {
  const auto it = index_.find(index_key(area, key));
  if (it == index_.end()) {
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  it->second->last_access_ms = stamp_locked();
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
  const std::int64_t now = stamp_locked();
  lru_.push_front(Entry{area, std::string(key), value, now, now, 0});
  ++entries_[static_cast<std::size_t>(area)];
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

Result<std::vector<std::optional<ObjectInfo>>>
MemoryStore::describe(std::span<const ListCursor> entries) {
  std::vector<std::optional<ObjectInfo>> out(entries.size());
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (const auto it = index_.find(index_key(entries[i].area, entries[i].key));
        it != index_.end()) {
      const Entry& e = *it->second;
      out[i] = ObjectInfo{e.area, e.key, e.value.size(), e.created_ms, e.last_access_ms, e.hits};
    }
  }
  return out;
}

Result<TopList> MemoryStore::list_top(const TopListOptions& options) {
  const auto info_of = [](const Entry& e) {
    return ObjectInfo{e.area, e.key, e.value.size(), e.created_ms, e.last_access_ms, e.hits};
  };
  const auto before = [&options](const ObjectInfo& a, const ObjectInfo& b) {
    return comes_before(a, b, options.order);
  };
  TopList out;
  if (options.order == ListOrder::kLastAccess) {
    // The LRU list is that order already (front: the latest read or put):
    // read from the front, and past the limit only the entries that tie
    // with its last (ties go by key).
    std::lock_guard lock(mu_);
    out.entries = entries_of(options.area);
    for (const Entry& e : lru_) {
      if (options.area && e.area != *options.area) {
        continue;
      }
      if (options.limit == 0 || (out.rows.size() >= options.limit &&
                                 e.last_access_ms < out.rows[options.limit - 1].last_access_ms)) {
        break;
      }
      out.rows.push_back(info_of(e));
    }
    std::sort(out.rows.begin(), out.rows.end(), before); // a total order: ties go by key
  } else {
    // No order kept for these (keeping one for hits would cost every read):
    // the best `limit` of every entry, a heap whose front is the last kept.
    // Read in key order a chunk at a time, the lock let go between chunks,
    // so reads are not held up for the whole walk.
    constexpr std::size_t kChunk = 4096;
    std::string after;
    bool first = true;
    for (bool more = true; more;) {
      std::lock_guard lock(mu_);
      out.entries = entries_of(options.area);
      auto it = first ? ordered_.begin() : ordered_.upper_bound(after);
      first = false;
      std::size_t n = 0;
      for (; it != ordered_.end() && n < kChunk; ++it, ++n) {
        if (options.limit == 0 || (options.area && it->second->area != *options.area)) {
          continue;
        }
        ObjectInfo info = info_of(*it->second);
        if (out.rows.size() < options.limit) {
          out.rows.push_back(std::move(info));
          std::push_heap(out.rows.begin(), out.rows.end(), before);
        } else if (before(info, out.rows.front())) {
          std::pop_heap(out.rows.begin(), out.rows.end(), before);
          out.rows.back() = std::move(info);
          std::push_heap(out.rows.begin(), out.rows.end(), before);
        }
      }
      more = it != ordered_.end();
      if (more) {
        after = std::string(std::prev(it)->first);
      }
    }
    std::sort_heap(out.rows.begin(), out.rows.end(), before);
  }
  if (out.rows.size() > options.limit) {
    out.rows.resize(options.limit);
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
