#pragma once
// The Redis a cluster-mode suite runs against, either kind: a standalone
// redis-server or the 3-master Redis Cluster. Suites are value-parameterized
// over RedisKind (test names end in /Standalone or /RedisCluster) and share
// one backend of each kind per test process (see shared()).
//
// Faults: standalone, the server itself; a cluster, ONE master (the one a
// test names with aim_at, else the first): the other masters keep serving
// their slots, so what a test proves there is that losing part of the
// keyspace costs only misses and local work, not that kcache survives a
// whole cluster going away (kill_all/restart_all do that).

#include "redis_cluster.h"
#include "redis_server.h"

#include <memory>
#include <ostream>
#include <string>

namespace kcache::testing {

enum class RedisKind { kStandalone, kCluster };

inline std::string kind_name(RedisKind kind) {
  return kind == RedisKind::kStandalone ? "Standalone" : "RedisCluster";
}

// For gtest's failure messages ("GetParam() = RedisCluster").
inline std::ostream& operator<<(std::ostream& out, RedisKind kind) {
  return out << kind_name(kind);
}

class RedisBackend {
public:
  explicit RedisBackend(RedisKind kind) : kind_(kind) {
    if (kind == RedisKind::kStandalone) {
      server_ = std::make_unique<RedisServer>();
    } else {
      cluster_ = std::make_unique<RedisCluster>();
      target_ = cluster_->ports().front();
    }
  }

  RedisKind kind() const { return kind_; }
  bool is_cluster() const { return cluster_ != nullptr; }
  // Null for a standalone server.
  RedisCluster* cluster() const { return cluster_.get(); }
  // Standalone: redis://host:port[?query]; cluster: ...?cluster=1[&query].
  std::string url(const std::string& query = "") const {
    return server_ ? server_->url(query) : cluster_->url(query);
  }

  // The master the one-master faults hit (a cluster; no-op standalone).
  void aim_at(int port) {
    if (cluster_) {
      target_ = port;
    }
  }
  int target() const { return cluster_ ? target_ : server_->port(); }

  void pause() {
    server_ ? server_->pause() : cluster_->pause(target_);
    paused_ = true;
  }
  void resume() {
    server_ ? server_->resume() : cluster_->resume(target_);
    paused_ = false;
  }
  void kill() {
    server_ ? server_->kill() : cluster_->kill(target_);
    broken_ = true;
  }
  // Back on the same port(s), empty (no persistence); a cluster waits for
  // cluster_state:ok on every master.
  void restart() {
    server_ ? server_->restart() : cluster_->restart(target_);
    paused_ = broken_ = false;
  }
  // The whole Redis: the server, or every master.
  void kill_all() {
    if (server_) {
      server_->kill();
    } else {
      for (const int port : cluster_->ports()) {
        cluster_->kill(port);
      }
    }
    broken_ = true;
  }
  void restart_all() {
    server_ ? server_->restart() : cluster_->restart_all();
    paused_ = broken_ = false;
  }
  // After a test, whatever it did: every server up and answering, so the
  // next test of the process can share it.
  void heal() {
    if (paused_) {
      resume();
    }
    if (broken_) {
      restart_all();
    }
    if (cluster_) {
      target_ = cluster_->ports().front();
    }
  }

private:
  RedisKind kind_;
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisCluster> cluster_;
  int target_ = 0;
  bool paused_ = false;
  bool broken_ = false;
};

} // namespace kcache::testing
