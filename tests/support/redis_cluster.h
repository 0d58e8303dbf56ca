#pragma once
// A real 3-master Redis Cluster on free loopback ports, owned by the test:
// three `redis-server --cluster-enabled yes` (config files in a temp dir),
// joined by `redis-cli --cluster create`, up once every node says
// cluster_state:ok; killed in the destructor. Start-up takes about 2 s
// (redis-cli waits for the nodes to meet), so suites share one.
//
// Fault tests take one master away (pause: SIGSTOP; kill: SIGKILL) and
// restart it on its port and nodes.conf: it rejoins as the same node with
// the same slots, and no data (no persistence, no replicas). Down for less
// than cluster-node-timeout (15 s), the others still say cluster_state:ok and
// serve their own slots.

#include "temp_dir.h"

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace kcache::testing {

class RedisCluster {
public:
  // Throws std::runtime_error when redis-server or redis-cli is missing or
  // the cluster does not come up: never skipped silently.
  RedisCluster();
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  const std::vector<int>& ports() const { return ports_; }
  // redis://127.0.0.1:<first port>?cluster=1[&query]
  std::string url(const std::string& query = "") const;
  // The port of the master that serves `slot` now (from CLUSTER NODES).
  int owner_of(int slot) const;
  // Moves `slot` (and its keys) from its owner to the master on `to_port`,
  // as `redis-cli --cluster reshard` does: IMPORTING / MIGRATING, MIGRATE
  // each key, then SETSLOT NODE on every master.
  void move_slot(int slot, int to_port);
  // The two halves of move_slot, for tests that look in between (ASK).
  void start_migration(int slot, int to_port);
  void finish_migration(int slot, int to_port);

  // One master, by its port.
  void pause(int port);
  void resume(int port);
  void kill(int port);
  // Kills it if it runs, starts it again and waits for cluster_state:ok on
  // every master.
  void restart(int port);
  // Every master killed and started again (a whole-cluster outage).
  void restart_all();
  // The port of a master holding a key that matches `pattern` (SCAN MATCH),
  // or 0 when none does.
  int master_holding(const std::string& pattern) const;

private:
  std::size_t index_of(int port) const;
  void spawn(std::size_t index);
  void wait_until_ok() const;

  TempDir dir_;
  std::string server_;
  std::vector<int> ports_;
  std::vector<int> bus_ports_;
  std::vector<pid_t> pids_;
};

} // namespace kcache::testing
