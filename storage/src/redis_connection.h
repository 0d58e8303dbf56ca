#pragma once
// One hiredis connection to one Redis node (private to storage): connect with a
// deadline, AUTH and SELECT on every new connection, and pipelined exchanges
// whose replies come back owned (RedisReply), detached from hiredis.

#include <kcache/storage/redis_client.h>
#include <kcache/storage/redis_options.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace kcache::storage::redis {

struct Endpoint {
  std::string host;
  int port = 0;
  std::string name() const { return host + ":" + std::to_string(port); }
};
// "host:port"; nullopt-like empty host when the text is not one.
Endpoint parse_endpoint(std::string_view text);

RedisReply to_reply(const redisReply* raw);

// Called with Redis' answer when AUTH is refused (never with the password).
using AuthRefused = std::function<void(std::string_view why)>;

class Connection {
public:
  // Connects within options.connect_timeout, then AUTH (user/password) and
  // SELECT db; reads and writes then have options.op_timeout.
  static Result<std::unique_ptr<Connection>>
  open(const Endpoint& endpoint, const RedisOptions& options, const AuthRefused& on_auth_refused);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends every command, then reads one reply each. On an error the
  // connection is in an unknown state and must be dropped.
  Result<std::vector<RedisReply>> exchange(const std::vector<const RedisCommand*>& commands);
  Result<std::vector<RedisReply>> exchange(const std::vector<RedisCommand>& commands);
  Result<void> send(const RedisCommand& command);
  void set_timeout(std::chrono::milliseconds timeout);
  redisContext* context() const { return ctx_.get(); }
  // A StoreError from the context's last failure (kTimeout for a deadline).
  StoreError error(std::string_view what) const;

private:
  struct Free {
    void operator()(redisContext* c) const;
  };
  Connection() = default;
  std::unique_ptr<redisContext, Free> ctx_;
};

} // namespace kcache::storage::redis
