#include "redis_connection.h"

#include <hiredis/hiredis.h>

#include <cerrno>
#include <charconv>

namespace kcache::storage::redis {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using OwnedReply = std::unique_ptr<redisReply, FreeReply>;

} // namespace

Endpoint parse_endpoint(std::string_view text) {
  Endpoint out;
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return out;
  }
  const std::string_view port = text.substr(colon + 1);
  int value = 0;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || ptr != port.data() + port.size() || value <= 0 || value > 65535) {
    return out;
  }
  out.host = text.substr(0, colon);
  out.port = value;
  return out;
}

RedisReply to_reply(const redisReply* raw) {
  RedisReply out;
  switch (raw->type) {
  case REDIS_REPLY_INTEGER:
    out.type = RedisReply::Type::kInteger;
    out.integer = raw->integer;
    break;
  case REDIS_REPLY_STRING:
    out.type = RedisReply::Type::kString;
    out.str.assign(raw->str, raw->len);
    break;
  case REDIS_REPLY_STATUS:
    out.type = RedisReply::Type::kStatus;
    out.str.assign(raw->str, raw->len);
    break;
  case REDIS_REPLY_ERROR:
    out.type = RedisReply::Type::kError;
    out.str.assign(raw->str, raw->len);
    break;
  case REDIS_REPLY_ARRAY:
    out.type = RedisReply::Type::kArray;
    out.elements.reserve(raw->elements);
    for (std::size_t i = 0; i < raw->elements; ++i) {
      out.elements.push_back(to_reply(raw->element[i]));
    }
    break;
  default:
    break; // nil
  }
  return out;
}

void Connection::Free::operator()(redisContext* c) const {
  redisFree(c);
}

Connection::~Connection() = default;

StoreError Connection::error(std::string_view what) const {
  // hiredis reports a socket timeout as an I/O error with EAGAIN.
  const bool timeout = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  return StoreError{timeout ? StoreError::Code::kTimeout : StoreError::Code::kUnavailable,
                    "redis " + std::string(what) + ": " +
                        (ctx_->errstr[0] != '\0' ? ctx_->errstr : "error")};
}

void Connection::set_timeout(std::chrono::milliseconds timeout) {
  redisSetTimeout(ctx_.get(), to_timeval(timeout));
}

Result<std::unique_ptr<Connection>> Connection::open(const Endpoint& endpoint,
                                                     const RedisOptions& options,
                                                     const AuthRefused& on_auth_refused) {
  std::unique_ptr<Connection> conn(new Connection()); // NOLINT: private constructor
  conn->ctx_.reset(redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port,
                                           to_timeval(options.connect_timeout)));
  if (!conn->ctx_) {
    return tl::unexpected(StoreError{StoreError::Code::kUnavailable, "redis: out of memory"});
  }
  if (conn->ctx_->err != 0) {
    return tl::unexpected(conn->error("connect"));
  }
  conn->set_timeout(options.op_timeout);
  redisEnableKeepAlive(conn->ctx_.get());
  // AUTH first on every new connection (a reconnect after a Redis restart
  // included), then SELECT, which an unauthenticated connection may not run.
  std::vector<RedisCommand> setup;
  if (!options.user.empty()) {
    setup.push_back({"AUTH", options.user, options.password});
  } else if (!options.password.empty()) {
    setup.push_back({"AUTH", options.password});
  }
  if (options.db != 0) {
    setup.push_back({"SELECT", std::to_string(options.db)});
  }
  for (const RedisCommand& cmd : setup) {
    auto replies = conn->exchange({cmd});
    if (!replies) {
      return tl::unexpected(replies.error());
    }
    const RedisReply& r = replies->front();
    if (r.is_error()) {
      // Only the command's name and Redis' answer: argv holds the password.
      if (cmd[0] == "AUTH" && on_auth_refused) {
        on_auth_refused(r.str);
      }
      return tl::unexpected(
          StoreError{StoreError::Code::kUnavailable, "redis " + cmd[0] + ": " + r.str});
    }
  }
  return conn;
}

Result<void> Connection::send(const RedisCommand& command) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(command.size());
  lens.reserve(command.size());
  for (const std::string& a : command) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), argv.data(), lens.data()) !=
      REDIS_OK) {
    return tl::unexpected(error("append"));
  }
  return {};
}

Result<std::vector<RedisReply>> Connection::exchange(const std::vector<RedisCommand>& commands) {
  std::vector<const RedisCommand*> pointers;
  pointers.reserve(commands.size());
  for (const RedisCommand& cmd : commands) {
    pointers.push_back(&cmd);
  }
  return exchange(pointers);
}

Result<std::vector<RedisReply>>
Connection::exchange(const std::vector<const RedisCommand*>& commands) {
  for (const RedisCommand* cmd : commands) {
    if (auto sent = send(*cmd); !sent) {
      return tl::unexpected(sent.error());
    }
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (const RedisCommand* cmd : commands) {
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
      return tl::unexpected(error(cmd->empty() ? "reply" : cmd->front()));
    }
    const OwnedReply owned(static_cast<redisReply*>(raw));
    replies.push_back(to_reply(owned.get()));
  }
  return replies;
}

} // namespace kcache::storage::redis
