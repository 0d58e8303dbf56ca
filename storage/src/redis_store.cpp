#include <kcache/storage/redis_store.h>

#include <algorithm>
#include <map>
#include <set>

namespace kcache::storage {
namespace {

// Escapes glob characters so a key prefix matches literally in SCAN MATCH.
std::string glob_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

StoreError error_reply(const RedisCommand& command, const RedisReply& reply) {
  return StoreError{StoreError::Code::kIo, "redis " + command[0] + ": " + reply.str};
}

} // namespace

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)), client_(RedisClient::create(options_)) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::redis_key(Area area, std::string_view key) const {
  std::string out = options_.ns;
  out += ':';
  out += area_name(area);
  out += ':';
  out += key;
  return out;
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
    for (std::size_t j = 0; j < indices.size(); ++j) {
      const RedisReply& e = r->elements[j];
      if (e.type == RedisReply::Type::kString) {
        out[indices[j]] = std::optional<Bytes>{e.str};
      }
    }
  }
  return out;
}

Result<void> RedisStore::put(Area area, std::string_view key, std::string_view value) {
  const std::string k = redis_key(area, key);
  RedisCommand set{"SET", k, std::string(value)};
  if (options_.ttl) {
    set.insert(set.end(), {"EX", std::to_string(options_.ttl->count())});
  }
  auto r = run(k, std::move(set));
  if (!r) {
    return tl::unexpected(r.error());
  }
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
  return {};
}

Result<std::vector<ObjectInfo>> RedisStore::list(const ListOptions& options) {
  std::vector<ObjectInfo> out;
  const std::int64_t now = unix_now_ms();
  // A cluster's keyspace is split over its masters: SCAN each.
  auto masters = client_->masters();
  if (!masters) {
    return tl::unexpected(masters.error());
  }
  for (const Area area : {Area::kAction, Area::kCas}) {
    if ((options.area && *options.area != area) || (options.after && options.after->area > area) ||
        out.size() >= options.limit) {
      continue;
    }
    const std::size_t room = options.limit - out.size();
    const std::string prefix = redis_key(area, "");
    const std::string match = glob_escape(prefix) + glob_escape(options.prefix) + "*";
    const std::string* after =
        options.after && options.after->area == area ? &options.after->key : nullptr;
    // Redis keeps no order: the whole keyspace is scanned, and the first
    // `room` names in key order kept (a set: SCAN may repeat a key).
    std::set<std::string> names;
    for (const std::string& master : *masters) {
      std::string cursor = "0";
      do {
        const RedisCommand scan{"SCAN", cursor, "MATCH", match, "COUNT", "1000"};
        auto r = client_->run_on(master, scan);
        if (!r) {
          return tl::unexpected(r.error());
        }
        if (r->is_error()) {
          return tl::unexpected(error_reply(scan, *r));
        }
        if (r->type != RedisReply::Type::kArray || r->elements.size() != 2) {
          return tl::unexpected(StoreError{StoreError::Code::kIo, "redis SCAN: unexpected reply"});
        }
        cursor = r->elements[0].str;
        for (const RedisReply& key : r->elements[1].elements) {
          std::string name = key.str.substr(std::min(prefix.size(), key.str.size()));
          if ((after != nullptr && name <= *after) ||
              (names.size() >= room && name >= *names.rbegin())) {
            continue;
          }
          names.insert(std::move(name));
          if (names.size() > room) {
            names.erase(std::prev(names.end()));
          }
        }
      } while (cursor != "0");
    }
    // Sizes and idle times of the names kept only, a batch per round trip.
    constexpr std::size_t kBatch = 500;
    const std::vector<std::string> kept(names.begin(), names.end());
    for (std::size_t first = 0; first < kept.size(); first += kBatch) {
      const std::size_t last = std::min(kept.size(), first + kBatch);
      std::vector<std::pair<std::string, RedisCommand>> meta;
      for (std::size_t i = first; i < last; ++i) {
        const std::string k = redis_key(area, kept[i]);
        meta.emplace_back(k, RedisCommand{"STRLEN", k});
        meta.emplace_back(k, RedisCommand{"OBJECT", "IDLETIME", k});
      }
      auto replies = client_->run_many(std::move(meta));
      if (!replies) {
        return tl::unexpected(replies.error());
      }
      for (const RedisReply& reply : *replies) {
        if (reply.is_error()) {
          return tl::unexpected(StoreError{StoreError::Code::kIo, "redis list: " + reply.str});
        }
      }
      for (std::size_t i = first; i < last; ++i) {
        const RedisReply& len = (*replies)[2 * (i - first)];
        const RedisReply& idle = (*replies)[2 * (i - first) + 1];
        const std::int64_t idle_ms =
            idle.type == RedisReply::Type::kInteger ? idle.integer * 1000 : 0;
        out.push_back(ObjectInfo{
            area, kept[i],
            len.type == RedisReply::Type::kInteger ? static_cast<std::uint64_t>(len.integer) : 0, 0,
            now - idle_ms});
      }
    }
  }
  return out;
}

} // namespace kcache::storage
