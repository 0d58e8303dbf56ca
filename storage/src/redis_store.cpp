#include <kcache/storage/redis_store.h>

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace kcache::storage {

struct RedisStore::Connection {
  struct Free {
    void operator()(redisContext* c) const { redisFree(c); }
  };
  std::unique_ptr<redisContext, Free> ctx;
};

struct RedisStore::Reply {
  struct Free {
    void operator()(redisReply* r) const { freeReplyObject(r); }
  };
  explicit Reply(void* raw) : reply(static_cast<redisReply*>(raw)) {}
  std::unique_ptr<redisReply, Free> reply;
  const redisReply* operator->() const { return reply.get(); }
};

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

StoreError context_error(const redisContext* ctx, std::string_view what) {
  // hiredis reports a socket timeout as an I/O error with EAGAIN.
  const bool timeout = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  return StoreError{timeout ? StoreError::Code::kTimeout : StoreError::Code::kUnavailable,
                    "redis " + std::string(what) + ": " + (ctx->errstr[0] ? ctx->errstr : "error")};
}

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

} // namespace

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)), breaker_(options_.breaker),
      pool_(options_.max_idle_connections) {}

RedisStore::~RedisStore() = default;

std::string RedisStore::redis_key(Area area, std::string_view key) const {
  std::string out = options_.ns;
  out += ':';
  out += area_name(area);
  out += ':';
  out += key;
  return out;
}

Result<std::unique_ptr<RedisStore::Connection>> RedisStore::checkout() {
  if (auto idle = pool_.take()) {
    return idle;
  }
  auto conn = std::make_unique<Connection>();
  conn->ctx.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                          to_timeval(options_.connect_timeout)));
  if (!conn->ctx) {
    return tl::unexpected(StoreError{StoreError::Code::kUnavailable, "redis: out of memory"});
  }
  if (conn->ctx->err != 0) {
    return tl::unexpected(context_error(conn->ctx.get(), "connect"));
  }
  redisSetTimeout(conn->ctx.get(), to_timeval(options_.op_timeout));
  redisEnableKeepAlive(conn->ctx.get());
  // AUTH first on every new connection (a reconnect after a Redis restart
  // included), then SELECT, which an unauthenticated connection may not run.
  std::vector<Command> setup;
  if (!options_.user.empty()) {
    setup.push_back({"AUTH", options_.user, options_.password});
  } else if (!options_.password.empty()) {
    setup.push_back({"AUTH", options_.password});
  }
  if (options_.db != 0) {
    setup.push_back({"SELECT", std::to_string(options_.db)});
  }
  for (const Command& cmd : setup) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    const Reply r(
        redisCommandArgv(conn->ctx.get(), static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r.reply) {
      return tl::unexpected(context_error(conn->ctx.get(), cmd[0]));
    }
    if (r->type == REDIS_REPLY_ERROR) {
      // Only the command's name and Redis' answer: argv holds the password.
      const std::string why = std::string(r->str, r->len);
      if (cmd[0] == "AUTH") {
        note_auth(true, why);
      }
      return tl::unexpected(
          StoreError{StoreError::Code::kUnavailable, "redis " + cmd[0] + ": " + why});
    }
  }
  return conn;
}

void RedisStore::note_auth(bool failed, std::string_view why) {
  if (auth_failing_.exchange(failed) == failed) {
    return;
  }
  if (failed) {
    spdlog::error("redis tier {}: not authenticated ({}); it answers errors (misses) until the "
                  "URL's user:password is one the server accepts",
                  redacted_url(options_), why);
  } else {
    spdlog::info("redis tier {}: authenticated", redacted_url(options_));
  }
}

Result<std::vector<std::unique_ptr<RedisStore::Reply>>>
RedisStore::run(const std::vector<Command>& pipeline) {
  if (!breaker_.allow()) {
    return tl::unexpected(
        StoreError{StoreError::Code::kUnavailable, "redis: circuit open", /*rejected=*/true});
  }
  auto fail = [this](StoreError error) -> Result<std::vector<std::unique_ptr<Reply>>> {
    breaker_.record_failure();
    return tl::unexpected(std::move(error));
  };
  auto conn = checkout();
  if (!conn) {
    return fail(conn.error());
  }
  redisContext* ctx = (*conn)->ctx.get();
  for (const Command& cmd : pipeline) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(cmd.size());
    lens.reserve(cmd.size());
    for (const std::string& a : cmd) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return fail(context_error(ctx, "append"));
    }
  }
  std::vector<std::unique_ptr<Reply>> replies;
  replies.reserve(pipeline.size());
  for (std::size_t i = 0; i < pipeline.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx, &raw) != REDIS_OK || raw == nullptr) {
      // The connection is in an unknown state: it is dropped, not pooled.
      return fail(context_error(ctx, pipeline[i][0]));
    }
    replies.push_back(std::make_unique<Reply>(raw));
  }
  pool_.give_back(std::move(*conn));
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if ((*replies[i])->type != REDIS_REPLY_ERROR) {
      continue;
    }
    const std::string why((*replies[i])->str, (*replies[i])->len);
    const std::string message = "redis " + pipeline[i][0] + ": " + why;
    // A server that wants a password we did not send fails every request
    // alike: an outage, not one bad reply.
    if (why.starts_with("NOAUTH")) {
      note_auth(true, why);
      return fail(StoreError{StoreError::Code::kUnavailable, message});
    }
    breaker_.record_success();
    return tl::unexpected(StoreError{StoreError::Code::kIo, message});
  }
  breaker_.record_success();
  if (auth_failing_.load(std::memory_order_relaxed)) {
    note_auth(false, "");
  }
  return replies;
}

Result<std::unique_ptr<RedisStore::Reply>> RedisStore::run_one(Command command) {
  auto replies = run({std::move(command)});
  if (!replies) {
    return tl::unexpected(replies.error());
  }
  return std::move(replies->front());
}

GetResult RedisStore::get(Area area, std::string_view key) {
  auto r = run_one({"GET", redis_key(area, key)});
  if (!r) {
    return tl::unexpected(r.error());
  }
  if ((**r)->type != REDIS_REPLY_STRING) {
    return std::optional<Bytes>{};
  }
  return std::optional<Bytes>{Bytes((**r)->str, (**r)->len)};
}

std::vector<GetResult> RedisStore::get_many(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> out;
  if (keys.empty()) {
    return out;
  }
  Command mget{"MGET"};
  for (const std::string& key : keys) {
    mget.push_back(redis_key(area, key));
  }
  auto r = run_one(std::move(mget));
  if (!r || (**r)->type != REDIS_REPLY_ARRAY || (**r)->elements != keys.size()) {
    const StoreError error =
        r ? StoreError{StoreError::Code::kIo, "redis MGET: unexpected reply"} : r.error();
    out.assign(keys.size(), tl::unexpected(error));
    return out;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const redisReply* e = (**r)->element[i];
    if (e->type == REDIS_REPLY_STRING) {
      out.emplace_back(std::optional<Bytes>{Bytes(e->str, e->len)});
    } else {
      out.emplace_back(std::optional<Bytes>{});
    }
  }
  return out;
}

Result<void> RedisStore::put(Area area, std::string_view key, std::string_view value) {
  Command set{"SET", redis_key(area, key), std::string(value)};
  if (options_.ttl) {
    set.insert(set.end(), {"EX", std::to_string(options_.ttl->count())});
  }
  auto r = run_one(std::move(set));
  if (!r) {
    return tl::unexpected(r.error());
  }
  return {};
}

Result<bool> RedisStore::contains(Area area, std::string_view key) {
  auto r = run_one({"EXISTS", redis_key(area, key)});
  if (!r) {
    return tl::unexpected(r.error());
  }
  return (**r)->type == REDIS_REPLY_INTEGER && (**r)->integer > 0;
}

Result<void> RedisStore::remove(Area area, std::string_view key) {
  auto r = run_one({"DEL", redis_key(area, key)});
  if (!r) {
    return tl::unexpected(r.error());
  }
  return {};
}

Result<std::vector<ObjectInfo>> RedisStore::list(const ListOptions& options) {
  std::vector<ObjectInfo> out;
  const std::int64_t now = unix_now_ms();
  for (const Area area : {Area::kAction, Area::kCas}) {
    if (options.area && *options.area != area) {
      continue;
    }
    const std::string prefix = redis_key(area, "");
    const std::string match = glob_escape(prefix) + glob_escape(options.prefix) + "*";
    std::string cursor = "0";
    do {
      auto r = run_one({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
      if (!r) {
        return tl::unexpected(r.error());
      }
      if ((**r)->type != REDIS_REPLY_ARRAY || (**r)->elements != 2) {
        return tl::unexpected(StoreError{StoreError::Code::kIo, "redis SCAN: unexpected reply"});
      }
      cursor.assign((**r)->element[0]->str, (**r)->element[0]->len);
      const redisReply* keys = (**r)->element[1];
      std::vector<Command> meta;
      std::vector<std::string> names;
      for (std::size_t i = 0; i < keys->elements; ++i) {
        std::string full(keys->element[i]->str, keys->element[i]->len);
        meta.push_back({"STRLEN", full});
        meta.push_back({"OBJECT", "IDLETIME", full});
        names.push_back(full.substr(prefix.size()));
      }
      if (meta.empty()) {
        continue;
      }
      auto replies = run(meta);
      if (!replies) {
        return tl::unexpected(replies.error());
      }
      for (std::size_t i = 0; i < names.size() && out.size() < options.limit; ++i) {
        const redisReply* len = (*replies)[2 * i]->reply.get();
        const redisReply* idle = (*replies)[2 * i + 1]->reply.get();
        const std::int64_t idle_ms = idle->type == REDIS_REPLY_INTEGER ? idle->integer * 1000 : 0;
        out.push_back(ObjectInfo{
            area, names[i],
            len->type == REDIS_REPLY_INTEGER ? static_cast<std::uint64_t>(len->integer) : 0, 0,
            now - idle_ms});
      }
    } while (cursor != "0" && out.size() < options.limit);
  }
  return out;
}

} // namespace kcache::storage
