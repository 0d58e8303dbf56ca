#pragma once
// A kcached with its RESP listener on a free port, and hiredis helpers for
// the RESP tests.

#include "kcached_process.h"

#include <hiredis/hiredis.h>

#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

namespace kcache::testing {

// The RESP port kcached logged at start ("RESP listening on ... (port N)").
inline int resp_port(const KcachedProcess& kcached) {
  static const std::regex kLine(R"(RESP listening on \S+ \(port (\d+)\))");
  std::smatch m;
  const std::string log = kcached.log();
  if (!std::regex_search(log, m, kLine)) {
    throw std::runtime_error("no RESP port in kcached's log:\n" + log);
  }
  return std::stoi(m[1]);
}

struct RedisFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisConn = std::unique_ptr<redisContext, RedisFree>;
using Reply = std::unique_ptr<redisReply, ReplyFree>;

inline RedisConn redis_connect(int port) {
  RedisConn c(redisConnect("127.0.0.1", port));
  if (!c || c->err != 0) {
    throw std::runtime_error("cannot connect to the RESP port");
  }
  return c;
}

// One command, its arguments binary-safe.
inline Reply command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
}

// A status, error or bulk reply's text; "(nil)", ":N" for the others.
inline std::string text(const Reply& r) {
  if (!r) {
    return "(no reply)";
  }
  switch (r->type) {
  case REDIS_REPLY_STATUS:
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_ERROR:
    return std::string(r->str, r->len);
  case REDIS_REPLY_NIL:
    return "(nil)";
  case REDIS_REPLY_INTEGER:
    return ":" + std::to_string(r->integer);
  default:
    return "(array " + std::to_string(r->elements) + ")";
  }
}

} // namespace kcache::testing
