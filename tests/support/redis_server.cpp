#include "redis_server.h"

#include "process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace kcache::testing {
namespace {

std::string find_redis_server() {
  if (const char* env = std::getenv("KCACHE_REDIS_SERVER"); env != nullptr && *env != '\0') {
    return env;
  }
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    const std::string candidate = std::string(dir) + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  throw std::runtime_error("redis-server not found: run scripts/setup (it installs redis-server)");
}

bool answers_ping(int port) {
  const timeval tv{0, 200'000};
  std::unique_ptr<redisContext, decltype(&redisFree)> ctx(
      redisConnectWithTimeout("127.0.0.1", port, tv), &redisFree);
  if (!ctx || ctx->err != 0) {
    return false;
  }
  auto* reply = static_cast<redisReply*>(redisCommand(ctx.get(), "PING"));
  const bool ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
  if (reply != nullptr) {
    freeReplyObject(reply);
  }
  return ok;
}

} // namespace

struct RedisAdmin::Connection {
  std::unique_ptr<redisContext, decltype(&redisFree)> context{nullptr, &redisFree};
};

RedisAdmin::RedisAdmin(int port, const std::string& password)
    : connection_(std::make_unique<Connection>()) {
  connection_->context.reset(redisConnect("127.0.0.1", port));
  if (!password.empty()) {
    run({"AUTH", password});
  }
}

RedisAdmin::~RedisAdmin() = default;

std::string RedisAdmin::run(const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(redisCommandArgv(
      connection_->context.get(), static_cast<int>(args.size()), args.data(), lens.data()));
  std::string out;
  if (reply != nullptr) {
    out = reply->type == REDIS_REPLY_INTEGER ? std::to_string(reply->integer)
          : reply->str != nullptr            ? std::string(reply->str, reply->len)
                                             : "";
    freeReplyObject(reply);
  }
  return out;
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) {
      close(fd);
    }
    throw std::runtime_error("cannot find a free loopback port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

RedisServer::RedisServer() {
  // Another test's server may take the free port between the check and our
  // bind (ctest -j2): ours then exits while PING is answered by theirs, and
  // pausing ours would stall nothing. Only a server whose process id is ours
  // counts; else another port.
  for (int attempt = 1;; ++attempt) {
    port_ = free_loopback_port();
    spawn();
    const std::string info = RedisAdmin(port_).run({"INFO", "server"});
    if (info.find("process_id:" + std::to_string(pid_) + "\r") != std::string::npos) {
      return;
    }
    kill();
    if (attempt == 5) {
      throw std::runtime_error("redis-server: every port tried was another process's");
    }
  }
}

void RedisServer::spawn() {
  const std::string binary = find_redis_server();
  std::vector<std::string> args = {binary,    "--port",           std::to_string(port_),
                                   "--bind",  "127.0.0.1",        "--save",
                                   "",        "--appendonly",     "no",
                                   "--dir",   dir_.str(),         "--loglevel",
                                   "warning", "--protected-mode", "no"};
  // The server's own start-up chatter goes to a log beside its data.
  pid_ = spawn_logged(args, (dir_.path() / "redis.log").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!answers_ping(port_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill();
      throw std::runtime_error("redis-server did not answer PING on port " + std::to_string(port_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RedisServer::~RedisServer() {
  kill();
}

std::string RedisServer::url(const std::string& query) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + (query.empty() ? "" : "?" + query);
}

void RedisServer::kill() {
  kill_and_reap(pid_);
}

void RedisServer::pause() {
  if (pid_ > 0) {
    ::kill(pid_, SIGSTOP);
  }
}

void RedisServer::resume() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
  }
}

void RedisServer::restart() {
  kill();
  spawn();
}

} // namespace kcache::testing
