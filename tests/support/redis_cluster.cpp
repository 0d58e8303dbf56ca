#include "redis_cluster.h"

#include "process.h"
#include "redis_server.h"

#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace kcache::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string find_binary(const char* name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') {
    return env;
  }
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    const std::string candidate = std::string(dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  throw std::runtime_error(std::string(name) + " not found: run scripts/setup");
}

template <typename Predicate> void wait_until(Predicate ok, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!ok()) {
    if (Clock::now() > deadline) {
      throw std::runtime_error("redis cluster: " + what);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// CLUSTER GETKEYSINSLOT answers an array, which RedisAdmin does not read.
std::string a_key_in_slot(int port, const std::string& slot) {
  std::unique_ptr<redisContext, decltype(&redisFree)> ctx(redisConnect("127.0.0.1", port),
                                                          &redisFree);
  if (!ctx || ctx->err != 0) {
    throw std::runtime_error("redis cluster: cannot connect to " + std::to_string(port));
  }
  std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(
      static_cast<redisReply*>(redisCommand(ctx.get(), "CLUSTER GETKEYSINSLOT %s 1", slot.c_str())),
      &freeReplyObject);
  if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 1) {
    throw std::runtime_error("redis cluster: GETKEYSINSLOT " + slot + " failed");
  }
  return {reply->element[0]->str, reply->element[0]->len};
}

} // namespace

RedisCluster::RedisCluster() : server_(find_binary("redis-server", "KCACHE_REDIS_SERVER")) {
  const std::string cli = find_binary("redis-cli", "KCACHE_REDIS_CLI");
  for (std::size_t i = 0; i < 3; ++i) {
    ports_.push_back(free_loopback_port());
    // The bus port is named: port + 10000 (the default) may not be free.
    bus_ports_.push_back(free_loopback_port());
    pids_.push_back(-1);
    spawn(i);
  }
  std::vector<std::string> create = {cli, "--cluster", "create"};
  for (const int port : ports_) {
    create.push_back("127.0.0.1:" + std::to_string(port));
  }
  create.emplace_back("--cluster-yes");
  pid_t pid = spawn_logged(create, (dir_.path() / "create.log").string());
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("redis-cli --cluster create failed: see " +
                             (dir_.path() / "create.log").string());
  }
  wait_until_ok();
}

// Starts master `index` on its ports and directory (nodes.conf: after a
// restart it is the same node, owning the same slots) and waits for PING.
void RedisCluster::spawn(std::size_t index) {
  const int port = ports_[index];
  const std::filesystem::path dir = dir_.path() / std::to_string(port);
  std::filesystem::create_directories(dir);
  pids_[index] = spawn_logged({server_,
                               "--port",
                               std::to_string(port),
                               "--cluster-port",
                               std::to_string(bus_ports_[index]),
                               "--bind",
                               "127.0.0.1",
                               "--cluster-enabled",
                               "yes",
                               "--cluster-config-file",
                               (dir / "nodes.conf").string(),
                               "--save",
                               "",
                               "--appendonly",
                               "no",
                               "--dir",
                               dir.string(),
                               "--loglevel",
                               "warning",
                               "--protected-mode",
                               "no"},
                              (dir / "redis.log").string());
  wait_until([port] { return RedisAdmin(port).run({"PING"}) == "PONG"; },
             "node " + std::to_string(port) + " does not answer PING");
}

void RedisCluster::wait_until_ok() const {
  for (const int port : ports_) {
    wait_until(
        [port] {
          return RedisAdmin(port).run({"CLUSTER", "INFO"}).find("cluster_state:ok") !=
                 std::string::npos;
        },
        "node " + std::to_string(port) + " never reached cluster_state:ok");
  }
}

RedisCluster::~RedisCluster() {
  for (pid_t& pid : pids_) {
    kill_and_reap(pid);
  }
}

std::string RedisCluster::url(const std::string& query) const {
  return "redis://127.0.0.1:" + std::to_string(ports_.front()) + "?cluster=1" +
         (query.empty() ? "" : "&" + query);
}

int RedisCluster::owner_of(int slot) const {
  // "<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slots>..."
  std::istringstream nodes(RedisAdmin(ports_.front()).run({"CLUSTER", "NODES"}));
  for (std::string line; std::getline(nodes, line);) {
    std::istringstream fields(line);
    std::string id, address, flags, master, ping, pong, epoch, link, range;
    fields >> id >> address >> flags >> master >> ping >> pong >> epoch >> link;
    if (flags.find("master") == std::string::npos) {
      continue;
    }
    while (fields >> range) {
      if (range.starts_with("[")) {
        continue; // a migration in progress, not ownership
      }
      const auto dash = range.find('-');
      const int first = std::stoi(range.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
      if (slot >= first && slot <= last) {
        const auto colon = address.find(':');
        return std::stoi(address.substr(colon + 1, address.find('@') - colon - 1));
      }
    }
  }
  throw std::runtime_error("redis cluster: no master owns slot " + std::to_string(slot));
}

void RedisCluster::start_migration(int slot, int to_port) {
  const int from_port = owner_of(slot);
  const std::string s = std::to_string(slot);
  RedisAdmin to(to_port);
  RedisAdmin from(from_port);
  to.run({"CLUSTER", "SETSLOT", s, "IMPORTING", from.run({"CLUSTER", "MYID"})});
  from.run({"CLUSTER", "SETSLOT", s, "MIGRATING", to.run({"CLUSTER", "MYID"})});
}

void RedisCluster::finish_migration(int slot, int to_port) {
  const int from_port = owner_of(slot);
  const std::string s = std::to_string(slot);
  RedisAdmin from(from_port);
  // Every key still on the source, in batches (COUNTKEYSINSLOT is exact).
  while (from.run({"CLUSTER", "COUNTKEYSINSLOT", s}) != "0") {
    const std::string key = a_key_in_slot(from_port, s);
    from.run({"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0", "5000", "KEYS", key});
  }
  const std::string to_id = RedisAdmin(to_port).run({"CLUSTER", "MYID"});
  // The new owner first, as the spec asks, then the others.
  RedisAdmin(to_port).run({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  for (const int port : ports_) {
    if (port != to_port) {
      RedisAdmin(port).run({"CLUSTER", "SETSLOT", s, "NODE", to_id});
    }
  }
}

void RedisCluster::move_slot(int slot, int to_port) {
  start_migration(slot, to_port);
  finish_migration(slot, to_port);
}

std::size_t RedisCluster::index_of(int port) const {
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    if (ports_[i] == port) {
      return i;
    }
  }
  throw std::runtime_error("redis cluster: no master on port " + std::to_string(port));
}

void RedisCluster::pause(int port) {
  if (const pid_t pid = pids_[index_of(port)]; pid > 0) {
    ::kill(pid, SIGSTOP);
  }
}

void RedisCluster::resume(int port) {
  if (const pid_t pid = pids_[index_of(port)]; pid > 0) {
    ::kill(pid, SIGCONT);
  }
}

void RedisCluster::kill(int port) {
  kill_and_reap(pids_[index_of(port)]);
}

void RedisCluster::restart(int port) {
  const std::size_t index = index_of(port);
  kill_and_reap(pids_[index]);
  spawn(index);
  wait_until_ok();
}

void RedisCluster::restart_all() {
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    kill_and_reap(pids_[i]);
  }
  for (std::size_t i = 0; i < ports_.size(); ++i) {
    spawn(i);
  }
  wait_until_ok();
}

int RedisCluster::master_holding(const std::string& pattern) const {
  for (const int port : ports_) {
    std::unique_ptr<redisContext, decltype(&redisFree)> ctx(redisConnect("127.0.0.1", port),
                                                            &redisFree);
    if (!ctx || ctx->err != 0) {
      continue; // a master that is down holds nothing we can see
    }
    std::string cursor = "0";
    do {
      std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply(
          static_cast<redisReply*>(redisCommand(ctx.get(), "SCAN %s MATCH %s COUNT 1000",
                                                cursor.c_str(), pattern.c_str())),
          &freeReplyObject);
      if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
        break;
      }
      if (reply->element[1]->elements > 0) {
        return port;
      }
      cursor.assign(reply->element[0]->str, reply->element[0]->len);
    } while (cursor != "0");
  }
  return 0;
}

} // namespace kcache::testing
