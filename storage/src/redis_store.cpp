#include "redis_order_index.h"

#include <kcache/storage/redis_store.h>

#include <algorithm>
#include <map>

namespace kcache::storage {

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)), client_(RedisClient::create(options_)),
      index_(std::make_unique<detail::RedisOrderIndex>(*client_, options_.ns, options_.ttl)) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::redis_key(Area area, std::string_view key) const {
  return detail::redis_value_key(options_.ns, area, key);
}

Result<RedisReply> RedisStore::run(std::string_view key, RedisCommand command) {
  const std::string name = command.front();
  auto reply = client_->run(key, std::move(command)); // a put's value is not copied
  if (reply && reply->is_error()) {
    return tl::unexpected(StoreError{StoreError::Code::kIo, "redis " + name + ": " + reply->str});
  }
  return reply;
}

GetResult RedisStore::get(Area area, std::string_view key) {
  auto got = peek(area, key);
  if (got && *got) {
    index_->record_read(area, key, unix_now_ms());
  }
  return got;
}

GetResult RedisStore::peek(Area area, std::string_view key) {
  const std::string k = redis_key(area, key);
  auto r = run(k, {"GET", k});
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (r->type != RedisReply::Type::kString) {
    return std::optional<Bytes>{};
  }
  return std::optional<Bytes>{std::move(r->str)};
}

std::vector<GetResult> RedisStore::get_many(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> out;
  if (keys.empty()) {
    return out;
  }
  // One MGET per hash slot (a cluster refuses a cross-slot MGET; standalone
  // it is one MGET), the MGETs for one node in one pipeline.
  std::map<std::uint16_t, std::vector<std::size_t>> by_slot;
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    full.push_back(redis_key(area, keys[i]));
    by_slot[client_->is_cluster() ? redis_hash_slot(full.back()) : 0].push_back(i);
  }
  std::vector<std::pair<std::string, RedisCommand>> mgets;
  for (const auto& [slot, indices] : by_slot) {
    RedisCommand mget{"MGET"};
    for (const std::size_t i : indices) {
      mget.push_back(full[i]);
    }
    mgets.emplace_back(full[indices.front()], std::move(mget));
  }
  auto replies = client_->run_many(std::move(mgets));
  out.assign(keys.size(), std::optional<Bytes>{});
  std::size_t group = 0;
  for (const auto& [slot, indices] : by_slot) {
    const RedisReply* r = replies ? &(*replies)[group++] : nullptr;
    if (r == nullptr || r->type != RedisReply::Type::kArray ||
        r->elements.size() != indices.size()) {
      const StoreError error =
          replies ? StoreError{StoreError::Code::kIo,
                               "redis MGET: " + (r->is_error() ? r->str : "unexpected reply")}
                  : replies.error();
      for (const std::size_t i : indices) {
        out[i] = tl::unexpected(error);
      }
      continue;
    }
    const std::int64_t now = unix_now_ms();
    for (std::size_t j = 0; j < indices.size(); ++j) {
      const RedisReply& e = r->elements[j];
      if (e.type == RedisReply::Type::kString) {
        out[indices[j]] = std::optional<Bytes>{e.str};
        index_->record_read(area, keys[indices[j]], now);
      }
    }
  }
  return out;
}

Result<void> RedisStore::put(Area area, std::string_view key, std::string_view value) {
  const std::string k = redis_key(area, key);
  const std::uint64_t size = value.size();
  RedisCommand set{"SET", k, std::string(value)};
  if (options_.ttl) {
    set.insert(set.end(), {"EX", std::to_string(options_.ttl->count())});
  }
  // The value first, then its index keys: a listing that finds a key in the
  // index and no value drops the key, which must not happen to a put under
  // way. Standalone, one pipeline keeps that order; a cluster has two nodes
  // to reach, one after the other.
  auto indexing = index_->index_commands(area, key, size, unix_now_ms());
  const std::size_t index_writes = indexing.size();
  Result<std::vector<RedisReply>> indexed = std::vector<RedisReply>{};
  if (client_->is_cluster()) {
    auto r = run(k, std::move(set));
    if (!r) {
      return tl::unexpected(r.error());
    }
    indexed = client_->run_many(std::move(indexing));
  } else {
    indexing.insert(indexing.begin(), {k, std::move(set)});
    indexed = client_->run_many(std::move(indexing));
    if (!indexed) {
      return tl::unexpected(indexed.error());
    }
    if (indexed->empty() || indexed->front().is_error()) {
      return tl::unexpected(StoreError{
          StoreError::Code::kIo,
          "redis SET: " + (indexed->empty() ? std::string("no reply") : indexed->front().str)});
    }
    indexed->erase(indexed->begin());
  }
  // Stored either way; an entry left out of the index is indexed by a retry.
  const auto refused = indexed ? std::find_if(indexed->begin(), indexed->end(),
                                              [](const RedisReply& r) { return r.is_error(); })
                               : std::vector<RedisReply>::iterator{};
  if (!indexed || indexed->size() != index_writes || refused != indexed->end()) {
    index_->index_failed(index_->index_commands(area, key, size, unix_now_ms()),
                         !indexed                    ? indexed.error().message
                         : refused != indexed->end() ? refused->str
                                                     : std::string("no reply"));
    // Not the trim and its retries too: with the index's node stalled each
    // would wait out another timeout inside this put (a trainer's put then
    // outlasted its 2 s). The next put whose index write lands does them.
    return {};
  }
  index_->index_written();
  index_->trim_if_due();
  return {};
}

Result<bool> RedisStore::contains(Area area, std::string_view key) {
  const std::string k = redis_key(area, key);
  auto r = run(k, {"EXISTS", k});
  if (!r) {
    return tl::unexpected(r.error());
  }
  return r->type == RedisReply::Type::kInteger && r->integer > 0;
}

Result<void> RedisStore::remove(Area area, std::string_view key) {
  const std::string k = redis_key(area, key);
  auto r = run(k, {"DEL", k});
  if (!r) {
    return tl::unexpected(r.error());
  }
  // Left in the index, the key would only be dropped by the next listing.
  const std::string member(key);
  (void)index_->drop_unless_stored(area, std::span(&member, 1));
  return {};
}

Result<std::vector<ObjectInfo>> RedisStore::list(const ListOptions& options) {
  return index_->list(options);
}

Result<TopList> RedisStore::list_top(const TopListOptions& options) {
  return index_->list_top(options);
}

Result<std::vector<std::optional<ObjectInfo>>>
RedisStore::describe(std::span<const ListCursor> entries) {
  return index_->describe(entries);
}

} // namespace kcache::storage
