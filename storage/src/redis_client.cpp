// RedisClient: one pool and one circuit breaker per Redis node, and (Redis
// Cluster) routing by hash slot with MOVED / ASK followed per command.
#include "redis_connection.h"

#include <kcache/protocol/connection_pool.h>
#include <kcache/storage/redis_client.h>

#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace kcache::storage {
namespace {

using redis::Connection;
using redis::Endpoint;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kSlots = 16384;
// A slot moved twice while we asked is a cluster in trouble, not a route.
constexpr int kMaxRedirects = 5;
// The slot map is also re-read this often, so a resharding that never sent
// us a MOVED (a new master, a failover) is picked up.
constexpr auto kRefreshEvery = std::chrono::seconds(10);
// A burst of MOVED during a resharding re-reads the map at most this often.
constexpr auto kRefreshGap = std::chrono::milliseconds(100);
// ...and no node answering it is asked again only after this.
constexpr auto kRefreshRetry = std::chrono::seconds(1);

struct Redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  std::string node;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381".
std::optional<Redirect> redirect_of(const RedisReply& reply) {
  if (!reply.is_error()) {
    return std::nullopt;
  }
  Redirect out;
  std::string_view rest = reply.str;
  if (rest.starts_with("MOVED ")) {
    rest.remove_prefix(6);
  } else if (rest.starts_with("ASK ")) {
    out.ask = true;
    rest.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = rest.find(' ');
  if (space == std::string_view::npos) {
    return std::nullopt;
  }
  const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + space, out.slot);
  if (ec != std::errc() || out.slot >= kSlots) {
    return std::nullopt;
  }
  out.node = rest.substr(space + 1);
  if (redis::parse_endpoint(out.node).host.empty()) {
    return std::nullopt;
  }
  return out;
}

std::string sha1_hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &size, EVP_sha1(), nullptr);
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xFU];
  }
  return out;
}

// A breaker per node, not per client: in a cluster with one master stalled
// the others keep answering, so a shared breaker's failure count was reset by
// every success and never opened, and each command for the stalled master's
// slots waited out the op timeout on the caller's thread (kcached's I/O
// threads). Per node, that master's commands fail fast after
// `failure_threshold` timeouts while the rest of the keyspace is served.
struct Node {
  Node(Endpoint e, std::size_t max_idle, protocol::CircuitBreakerOptions breaker_options)
      : endpoint(std::move(e)), pool(max_idle), breaker(breaker_options) {}
  const Endpoint endpoint;
  protocol::ConnectionPool<Connection> pool;
  protocol::CircuitBreaker breaker;
};

class Client final : public RedisClient {
public:
  explicit Client(RedisOptions options)
      : options_(std::move(options)), primary_(Endpoint{options_.host, options_.port}.name()),
        cluster_(options_.cluster) {}

  Result<RedisReply> run(std::string_view routing_key, RedisCommand command) override {
    std::vector<RedisCommand> commands;
    commands.push_back(std::move(command));
    auto replies = guarded(commands, {route(routing_key)}, std::nullopt);
    if (!replies) {
      return tl::unexpected(replies.error());
    }
    return std::move(replies->front());
  }

  Result<std::vector<RedisReply>> pipeline(std::string_view routing_key,
                                           std::vector<RedisCommand> commands) override {
    std::vector<std::string> targets(commands.size(), route(routing_key));
    return guarded(commands, std::move(targets), std::nullopt);
  }

  Result<RedisReply> run_blocking(std::string_view routing_key, RedisCommand command,
                                  std::chrono::milliseconds timeout) override {
    std::vector<RedisCommand> commands;
    commands.push_back(std::move(command));
    auto replies = guarded(commands, {route(routing_key)}, timeout);
    if (!replies) {
      return tl::unexpected(replies.error());
    }
    return std::move(replies->front());
  }

  Result<RedisReply> eval(std::string_view script, std::vector<std::string> keys,
                          std::vector<std::string> args) override {
    const std::string routing = keys.empty() ? std::string() : keys.front();
    RedisCommand command{"EVALSHA", sha1_hex(script), std::to_string(keys.size())};
    command.insert(command.end(), keys.begin(), keys.end());
    command.insert(command.end(), args.begin(), args.end());
    auto reply = run(routing, command);
    // Scripts are cached per node and lost on a restart: send it once.
    if (reply && reply->is_error() && reply->str.starts_with("NOSCRIPT")) {
      command[0] = "EVAL";
      command[1] = std::string(script);
      reply = run(routing, std::move(command));
    }
    return reply;
  }

  std::string key(std::string_view suffix) const override {
    std::string out = options_.ns;
    out += ':';
    out += suffix;
    return out;
  }

  protocol::CircuitBreaker::State breaker_state() const override {
    const std::lock_guard lock(mu_);
    return breakers_locked();
  }

  Result<void> publish(std::string_view channel, std::string_view message) override {
    auto reply = run(channel, {"PUBLISH", std::string(channel), std::string(message)});
    if (!reply) {
      return tl::unexpected(reply.error());
    }
    if (reply->is_error()) {
      return tl::unexpected(StoreError{StoreError::Code::kIo, "redis PUBLISH: " + reply->str});
    }
    return {};
  }

  bool is_cluster() const override { return cluster_.load(); }

  Result<std::vector<RedisReply>>
  run_many(std::vector<std::pair<std::string, RedisCommand>> routed) override {
    std::vector<RedisCommand> commands;
    std::vector<std::string> targets;
    commands.reserve(routed.size());
    targets.reserve(routed.size());
    for (auto& [routing_key, command] : routed) {
      targets.push_back(route(routing_key));
      commands.push_back(std::move(command));
    }
    return guarded(commands, std::move(targets), std::nullopt);
  }

  Result<std::vector<std::string>> masters() override {
    if (!cluster_) {
      return std::vector<std::string>{primary_};
    }
    if (breaker_state() == protocol::CircuitBreaker::State::kOpen) {
      return tl::unexpected(
          StoreError{StoreError::Code::kUnavailable, "redis: circuit open", /*rejected=*/true});
    }
    refresh_if_due();
    std::set<std::string> unique;
    {
      const std::lock_guard lock(mu_);
      unique.insert(slots_.begin(), slots_.end());
    }
    unique.erase(std::string());
    if (unique.empty()) {
      return tl::unexpected(
          StoreError{StoreError::Code::kUnavailable, "redis: no cluster slot map"});
    }
    return std::vector<std::string>(unique.begin(), unique.end());
  }

  Result<RedisReply> run_on(std::string_view node, RedisCommand command) override {
    std::vector<RedisCommand> commands;
    commands.push_back(std::move(command));
    auto replies = guarded(commands, {std::string(node)}, std::nullopt);
    if (!replies) {
      return tl::unexpected(replies.error());
    }
    return std::move(replies->front());
  }

private:
  // One call: each node's breaker is consulted and fed in exchange().
  Result<std::vector<RedisReply>> guarded(const std::vector<RedisCommand>& commands,
                                          std::vector<std::string> targets,
                                          std::optional<std::chrono::milliseconds> block) {
    auto replies = execute(commands, std::move(targets), block);
    if (!replies) {
      if (cluster_ && !replies.error().rejected) {
        stale_ = true; // a dead master: its replica may have taken its slots
      }
      return replies;
    }
    if (auth_failing_.load(std::memory_order_relaxed)) {
      note_auth(false, "");
    }
    if (stale_) {
      refresh_if_due();
    }
    return replies;
  }

  // Sends commands[i] to targets[i], one pipeline per node, and sends again
  // each command that was redirected (MOVED: to the slot's new owner; ASK: to
  // the importing node, after ASKING) until none is.
  Result<std::vector<RedisReply>> execute(const std::vector<RedisCommand>& commands,
                                          std::vector<std::string> targets,
                                          std::optional<std::chrono::milliseconds> block) {
    std::vector<RedisReply> replies(commands.size());
    std::vector<bool> asking(commands.size(), false);
    std::vector<std::size_t> pending(commands.size());
    for (std::size_t i = 0; i < pending.size(); ++i) {
      pending[i] = i;
    }
    for (int round = 0; !pending.empty(); ++round) {
      if (round > kMaxRedirects) {
        return tl::unexpected(
            StoreError{StoreError::Code::kUnavailable,
                       "redis " + commands[pending.front()][0] + ": too many cluster redirects"});
      }
      std::map<std::string, std::vector<std::size_t>> by_node;
      for (const std::size_t i : pending) {
        by_node[targets[i]].push_back(i);
      }
      for (const auto& [node, indices] : by_node) {
        static const RedisCommand kAsking{"ASKING"};
        std::vector<const RedisCommand*> batch; // pointers: values are not copied
        for (const std::size_t i : indices) {
          if (asking[i]) {
            batch.push_back(&kAsking);
          }
          batch.push_back(&commands[i]);
        }
        auto got = exchange(node, batch, block);
        if (!got) {
          return tl::unexpected(got.error());
        }
        std::size_t at = 0;
        for (const std::size_t i : indices) {
          at += asking[i] ? 1 : 0; // ASKING's own +OK
          replies[i] = std::move((*got)[at++]);
        }
      }
      std::vector<std::size_t> again;
      for (const std::size_t i : pending) {
        auto redirect = redirect_of(replies[i]);
        if (!redirect) {
          continue;
        }
        if (!redirect->ask) {
          moved(*redirect);
        }
        targets[i] = redirect->node;
        asking[i] = redirect->ask;
        again.push_back(i);
      }
      pending = std::move(again);
    }
    return replies;
  }

  // One pipeline to one node, behind that node's breaker: could-not-ask
  // (down, timeout, AUTH refused) is a failure; any reply from Redis, an
  // error reply included, a success.
  Result<std::vector<RedisReply>> exchange(const std::string& name,
                                           const std::vector<const RedisCommand*>& batch,
                                           std::optional<std::chrono::milliseconds> block) {
    Node* node = node_named(name);
    if (node == nullptr) {
      return tl::unexpected(
          StoreError{StoreError::Code::kUnavailable, "redis: bad node address " + name});
    }
    if (RedisCallScope::failed_before(name)) {
      return tl::unexpected(StoreError{StoreError::Code::kUnavailable,
                                       "redis " + name + ": did not answer earlier in this request",
                                       /*rejected=*/true});
    }
    if (!node->breaker.allow()) {
      return tl::unexpected(StoreError{StoreError::Code::kUnavailable,
                                       "redis " + name + ": circuit open", /*rejected=*/true});
    }
    auto replies = exchange_on(*node, batch, block);
    if (!replies) {
      node->breaker.record_failure();
      RedisCallScope::note_failure(name);
      return replies;
    }
    for (std::size_t i = 0; i < replies->size(); ++i) {
      const RedisReply& reply = (*replies)[i];
      // A server that wants a password we did not send fails every request
      // alike: an outage, not one bad reply.
      if (reply.is_error() && reply.str.starts_with("NOAUTH")) {
        note_auth(true, reply.str);
        node->breaker.record_failure();
        return tl::unexpected(StoreError{StoreError::Code::kUnavailable,
                                         "redis " + batch[i]->front() + ": " + reply.str});
      }
    }
    node->breaker.record_success();
    return replies;
  }

  // One pipeline on the node's pooled connection (dialled when none is idle).
  Result<std::vector<RedisReply>> exchange_on(Node& node,
                                              const std::vector<const RedisCommand*>& batch,
                                              std::optional<std::chrono::milliseconds> block) {
    std::unique_ptr<Connection> conn = node.pool.take();
    if (!conn) {
      auto opened = Connection::open(node.endpoint, options_,
                                     [this](std::string_view why) { note_auth(true, why); });
      if (!opened) {
        return tl::unexpected(opened.error());
      }
      conn = std::move(*opened);
    }
    if (block) {
      conn->set_timeout(*block + options_.op_timeout);
    }
    auto replies = conn->exchange(batch);
    if (!replies) {
      return replies; // the connection is in an unknown state: dropped, not pooled
    }
    if (block) {
      conn->set_timeout(options_.op_timeout);
    }
    node.pool.give_back(std::move(conn));
    return replies;
  }

  Node* node_named(const std::string& name) {
    const std::lock_guard lock(mu_);
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      Endpoint endpoint = redis::parse_endpoint(name);
      if (endpoint.host.empty()) {
        return nullptr;
      }
      it = nodes_
               .emplace(name,
                        std::make_unique<Node>(std::move(endpoint), options_.max_idle_connections,
                                               options_.breaker))
               .first;
    }
    return it->second.get();
  }

  std::string route(std::string_view routing_key) {
    if (!cluster_) {
      return primary_;
    }
    refresh_if_due();
    const std::lock_guard lock(mu_);
    const std::string& owner = slots_[redis_hash_slot(routing_key)];
    return owner.empty() ? primary_ : owner;
  }

  void moved(const Redirect& redirect) {
    if (!cluster_.exchange(true)) {
      spdlog::info("redis {}: answers MOVED, routing by cluster hash slot", redacted_url(options_));
    }
    const std::lock_guard lock(mu_);
    slots_[redirect.slot] = redirect.node;
    stale_ = true;
  }

  // Re-reads CLUSTER SLOTS when the map was never read, is older than
  // kRefreshEvery, or a MOVED or a failure made it stale; one caller at a
  // time, at most every kRefreshGap.
  void refresh_if_due() {
    std::vector<std::string> candidates;
    {
      const std::lock_guard lock(mu_);
      const auto now = Clock::now();
      const bool due = !loaded_ || stale_ || now - last_refresh_ > kRefreshEvery;
      // A dead cluster is not asked again for its map on every call.
      const bool down = breakers_locked() == protocol::CircuitBreaker::State::kOpen;
      if (!due || down || refreshing_ || now < next_attempt_) {
        return;
      }
      refreshing_ = true;
      next_attempt_ = now + kRefreshGap;
      std::set<std::string> known(slots_.begin(), slots_.end());
      known.erase(std::string());
      candidates.assign(known.begin(), known.end());
    }
    candidates.push_back(primary_);
    candidates.insert(candidates.end(), options_.seeds.begin(), options_.seeds.end());
    std::optional<std::array<std::string, kSlots>> map;
    for (const std::string& candidate : candidates) {
      if (auto read = read_slots(candidate)) {
        map = std::move(read);
        break;
      }
    }
    const std::lock_guard lock(mu_);
    refreshing_ = false;
    if (map) {
      slots_ = std::move(*map);
      loaded_ = true;
      stale_ = false;
      last_refresh_ = Clock::now();
    } else {
      next_attempt_ = Clock::now() + kRefreshRetry;
    }
  }

  // CLUSTER SLOTS: [[start, end, [host, port, id], replicas...], ...].
  std::optional<std::array<std::string, kSlots>> read_slots(const std::string& name) {
    const RedisCommand slots{"CLUSTER", "SLOTS"};
    auto replies = exchange(name, {&slots}, std::nullopt);
    if (!replies || replies->front().type != RedisReply::Type::kArray ||
        replies->front().elements.empty()) {
      return std::nullopt;
    }
    const std::string asked_host = redis::parse_endpoint(name).host;
    std::array<std::string, kSlots> map;
    for (const RedisReply& range : replies->front().elements) {
      if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) {
        continue;
      }
      const RedisReply& master = range.elements[2];
      // An empty host is "the node you asked" (a node that does not know its
      // own address).
      const std::string host = master.elements[0].str.empty() ? asked_host : master.elements[0].str;
      const std::string owner = host + ":" + std::to_string(master.elements[1].integer);
      const auto first = range.elements[0].integer;
      const auto last = range.elements[1].integer;
      for (auto slot = first; slot <= last && slot < static_cast<long long>(kSlots); ++slot) {
        if (slot >= 0) {
          map[static_cast<std::size_t>(slot)] = owner;
        }
      }
    }
    return map;
  }

  // Over the nodes' breakers: closed while every node can be asked (or none
  // is known yet), open when none can, half-open in between (some node's
  // circuit open or probing). Caller holds mu_.
  protocol::CircuitBreaker::State breakers_locked() const {
    using State = protocol::CircuitBreaker::State;
    std::size_t open = 0;
    std::size_t closed = 0;
    for (const auto& [name, node] : nodes_) {
      const State state = node->breaker.state();
      open += state == State::kOpen ? 1 : 0;
      closed += state == State::kClosed ? 1 : 0;
    }
    if (closed == nodes_.size()) {
      return State::kClosed;
    }
    return open == nodes_.size() ? State::kOpen : State::kHalfOpen;
  }

  // Logs a refused AUTH or a missing one once per outage (not per request).
  void note_auth(bool failed, std::string_view why) {
    if (auth_failing_.exchange(failed) == failed) {
      return;
    }
    if (failed) {
      spdlog::error("redis tier {}: not authenticated ({}); it answers errors (misses) until the "
                    "URL's user:password is one the server accepts",
                    redacted_url(options_), why);
    } else {
      spdlog::info("redis tier {}: authenticated", redacted_url(options_));
    }
  }

  const RedisOptions options_;
  std::atomic<bool> auth_failing_{false};
  const std::string primary_;
  std::atomic<bool> cluster_;
  std::atomic<bool> stale_{false};

  mutable std::mutex mu_; // guards what follows
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::array<std::string, kSlots> slots_; // slot -> master "host:port"
  bool loaded_ = false;
  bool refreshing_ = false;
  Clock::time_point last_refresh_{};
  Clock::time_point next_attempt_{};
};

} // namespace

namespace {
thread_local RedisCallScope* current_scope = nullptr;
} // namespace

RedisCallScope::RedisCallScope() : outer_(current_scope) {
  current_scope = this;
}

RedisCallScope::~RedisCallScope() {
  current_scope = outer_;
}

bool RedisCallScope::failed_before(std::string_view node) {
  return current_scope != nullptr &&
         std::find(current_scope->failed_nodes_.begin(), current_scope->failed_nodes_.end(),
                   node) != current_scope->failed_nodes_.end();
}

void RedisCallScope::note_failure(std::string_view node) {
  if (current_scope != nullptr && !failed_before(node)) {
    current_scope->failed_nodes_.emplace_back(node);
  }
}

RedisClient::~RedisClient() = default;

std::unique_ptr<RedisClient> RedisClient::create(RedisOptions options) {
  return std::make_unique<Client>(std::move(options));
}

} // namespace kcache::storage
