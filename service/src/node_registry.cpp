#include <kcache/protocol/clock.h>
#include <kcache/service/node_registry.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace kcache::service {

namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    out += (out.empty() ? "" : ",") + part;
  }
  return out;
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> parts;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    parts.emplace_back(text.substr(0, comma));
    text = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  }
  return parts;
}

template <typename T> T number(const std::string& text) {
  T value{};
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

NodeInfo from_hash(const storage::RedisReply& reply) {
  std::map<std::string, std::string, std::less<>> fields;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    fields[reply.elements[i].str] = reply.elements[i + 1].str;
  }
  NodeInfo node;
  node.id = fields["id"];
  node.version = fields["version"];
  node.address = fields["address"];
  node.capabilities = split(fields["capabilities"]);
  node.workers = number<std::uint64_t>(fields["workers"]);
  node.queued = number<std::uint64_t>(fields["queued"]);
  node.running = number<std::uint64_t>(fields["running"]);
  node.started_ms = number<std::int64_t>(fields["started_ms"]);
  node.heartbeat_ms = number<std::int64_t>(fields["heartbeat_ms"]);
  return node;
}

} // namespace

NodeRegistry::NodeRegistry(storage::RedisClient& redis, std::chrono::milliseconds heartbeat,
                           Snapshot snapshot, MetricsRegistry& metrics)
    : redis_(redis), heartbeat_(heartbeat), snapshot_(std::move(snapshot)),
      started_ms_(protocol::unix_now_ms()) {
  metrics.describe("kcache_cluster_nodes", "gauge",
                   "Live kcached nodes in the cluster, as of this node's last heartbeat");
  metrics.add_collector([this](std::vector<MetricsRegistry::Sample>& out) {
    out.push_back({"kcache_cluster_nodes", {}, static_cast<double>(live_nodes_.load())});
  });
  heartbeater_ = std::jthread([this](const std::stop_token& stop) { loop(stop); });
}

NodeRegistry::~NodeRegistry() {
  heartbeater_.request_stop();
  cv_.notify_all();
  if (heartbeater_.joinable()) {
    heartbeater_.join();
  }
  if (!id_.empty()) {
    const std::string entry = redis_.key("node:" + id_);
    (void)redis_.run(entry, {"DEL", entry});
    const std::string set = redis_.key("nodes");
    (void)redis_.run(set, {"ZREM", set, id_});
  }
}

tl::expected<void, std::string> NodeRegistry::heartbeat_once() {
  NodeInfo self = snapshot_();
  id_ = self.id;
  const std::int64_t now = protocol::unix_now_ms();
  const std::string entry = redis_.key("node:" + self.id);
  auto wrote = redis_.pipeline(entry, {{"HSET",         entry,
                                        "id",           self.id,
                                        "version",      self.version,
                                        "address",      self.address,
                                        "capabilities", join(self.capabilities),
                                        "workers",      std::to_string(self.workers),
                                        "queued",       std::to_string(self.queued),
                                        "running",      std::to_string(self.running),
                                        "started_ms",   std::to_string(started_ms_),
                                        "heartbeat_ms", std::to_string(now)},
                                       {"PEXPIRE", entry, std::to_string(ttl().count())}});
  if (!wrote) {
    return tl::unexpected(wrote.error().message);
  }
  const std::string set = redis_.key("nodes");
  auto listed = redis_.pipeline(
      set, {{"ZADD", set, std::to_string(now), self.id},
            {"ZREMRANGEBYSCORE", set, "-inf", "(" + std::to_string(now - ttl().count())},
            {"ZCARD", set}});
  if (!listed) {
    return tl::unexpected(listed.error().message);
  }
  if (listed->size() == 3) {
    live_nodes_ = (*listed)[2].integer;
  }
  return {};
}

void NodeRegistry::loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    lock.unlock();
    if (auto ok = heartbeat_once(); !ok) {
      if (!outage_logged_.exchange(true)) {
        spdlog::warn("cluster: cannot heartbeat to Redis ({}); retrying every {} ms", ok.error(),
                     heartbeat_.count());
      }
    } else if (outage_logged_.exchange(false)) {
      spdlog::info("cluster: heartbeating to Redis again");
    }
    lock.lock();
    cv_.wait_for(lock, stop, heartbeat_, [] { return false; });
  }
}

tl::expected<std::vector<NodeInfo>, std::string> NodeRegistry::list() {
  const std::string set = redis_.key("nodes");
  const std::int64_t now = protocol::unix_now_ms();
  auto ids =
      redis_.run(set, {"ZRANGEBYSCORE", set, "(" + std::to_string(now - ttl().count()), "+inf"});
  if (!ids) {
    return tl::unexpected(ids.error().message);
  }
  std::vector<std::pair<std::string, storage::RedisCommand>> reads;
  for (const storage::RedisReply& id : ids->elements) {
    std::string entry = redis_.key("node:" + id.str);
    reads.push_back({entry, {"HGETALL", entry}});
  }
  std::vector<NodeInfo> nodes;
  if (reads.empty()) {
    return nodes;
  }
  auto hashes = redis_.run_many(std::move(reads));
  if (!hashes) {
    return tl::unexpected(hashes.error().message);
  }
  for (const storage::RedisReply& hash : *hashes) {
    if (hash.type == storage::RedisReply::Type::kArray && !hash.elements.empty()) {
      nodes.push_back(from_hash(hash));
    }
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.id < b.id; });
  return nodes;
}

} // namespace kcache::service
