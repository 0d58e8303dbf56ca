#pragma once
// A real 3-master Redis Cluster on free loopback ports, owned by the test:
// three `redis-server --cluster-enabled yes` (config files in a temp dir),
// joined by `redis-cli --cluster create`, up once every node says
// cluster_state:ok; killed in the destructor. Start-up takes about 2 s
// (redis-cli waits for the nodes to meet), so suites share one.

#include "temp_dir.h"

#include <sys/types.h>

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

private:
  TempDir dir_;
  std::vector<int> ports_;
  std::vector<pid_t> pids_;
};

} // namespace kcache::testing
