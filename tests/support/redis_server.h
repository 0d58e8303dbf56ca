#pragma once
// A real redis-server on a free loopback port, owned by the test: started in
// the constructor, killed in the destructor. kill()/pause()/resume() let fault
// tests take it away (SIGKILL) or make it hang (SIGSTOP).

#include "temp_dir.h"

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace kcache::testing {

class RedisServer {
public:
  // Throws std::runtime_error if redis-server is missing or does not start:
  // these tests must run against a real server, never skip silently.
  RedisServer();
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& query = "") const;
  void kill();
  void pause();
  void resume();
  void restart();

private:
  void spawn();
  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// One connection to a test's redis-server for setting it up and looking into
// it (CONFIG SET requirepass, ACL SETUSER, GET, EXISTS), authenticated with
// `password` when given. run() answers a string or status reply as its text,
// an integer as its decimal text, anything else as "".
class RedisAdmin {
public:
  explicit RedisAdmin(int port, const std::string& password = "");
  ~RedisAdmin();
  RedisAdmin(const RedisAdmin&) = delete;
  RedisAdmin& operator=(const RedisAdmin&) = delete;
  std::string run(const std::vector<std::string>& argv);

private:
  struct Connection;
  std::unique_ptr<Connection> connection_;
};

// Finds a TCP port on 127.0.0.1 that is free right now.
int free_loopback_port();

} // namespace kcache::testing
