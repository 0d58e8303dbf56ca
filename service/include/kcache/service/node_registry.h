#pragma once
// The cluster's members (cluster mode): every kcached heartbeats its entry,
// a hash "<ns>:node:<id>" that expires after three missed heartbeats, and its
// id into the sorted set "<ns>:nodes" scored by the heartbeat's unix ms.
// Readers take the ids scored within the last three heartbeats, so a dead
// node drops out by itself; the set is trimmed as nodes heartbeat.
// `kcache nodes` and GET /v1/nodes list them.

#include <kcache/protocol/admin.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/redis_client.h>

#include <tl/expected.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kcache::service {

using NodeInfo = protocol::NodeView;

class NodeRegistry {
public:
  using Snapshot = std::function<NodeInfo()>; // this node as it is now
  // Heartbeats at once, then every `heartbeat`. `redis` must outlive it.
  NodeRegistry(storage::RedisClient& redis, std::chrono::milliseconds heartbeat, Snapshot snapshot,
               MetricsRegistry& metrics);
  // Stops heartbeating and removes this node's entry (best effort: it would
  // expire anyway).
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // The live nodes, by id. An error when Redis cannot be asked.
  tl::expected<std::vector<NodeInfo>, std::string> list();

private:
  tl::expected<void, std::string> heartbeat_once();
  void loop(const std::stop_token& stop);
  std::chrono::milliseconds ttl() const { return heartbeat_ * 3; }

  storage::RedisClient& redis_;
  const std::chrono::milliseconds heartbeat_;
  const Snapshot snapshot_;
  const std::int64_t started_ms_;
  std::string id_; // set by the first snapshot
  std::atomic<std::int64_t> live_nodes_{0};
  std::atomic<bool> outage_logged_{false};
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::jthread heartbeater_;
};

} // namespace kcache::service
