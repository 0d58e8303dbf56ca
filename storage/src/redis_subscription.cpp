// RedisSubscription: SUBSCRIBE on its own connection and thread. The thread
// polls the socket (hiredis' sync API cannot time out a read and go on), so
// destruction is noticed within kPoll; a silent connection is PINGed and
// dropped when the PING goes unanswered, then dialled again with back-off.
#include "redis_connection.h"

#include <kcache/storage/redis_client.h>

#include <hiredis/hiredis.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace kcache::storage {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kIdleBeforePing = std::chrono::seconds(1);
constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::seconds(2);

class Subscription final : public RedisSubscription {
public:
  using Handler = std::function<void(std::string_view, std::string_view)>;
  Subscription(RedisOptions options, std::vector<std::string> channels, Handler on_message)
      : options_(std::move(options)), channels_(std::move(channels)),
        on_message_(std::move(on_message)) {
    endpoints_.push_back(redis::Endpoint{options_.host, options_.port});
    for (const std::string& seed : options_.seeds) {
      if (auto e = redis::parse_endpoint(seed); !e.host.empty()) {
        endpoints_.push_back(std::move(e));
      }
    }
    thread_ = std::thread([this] { loop(); });
  }

  ~Subscription() override {
    {
      const std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join(); // closing the connection unsubscribes
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

private:
  bool stopping() {
    const std::lock_guard lock(mu_);
    return stop_;
  }

  void loop() {
    auto backoff = kFirstBackoff;
    std::size_t next = 0;
    while (!stopping()) {
      const redis::Endpoint& endpoint = endpoints_[next % endpoints_.size()];
      auto conn = redis::Connection::open(endpoint, options_, nullptr);
      if (conn && listen(**conn)) {
        backoff = kFirstBackoff; // it was up: a fresh outage starts short
      }
      if (stopping()) {
        break;
      }
      ++next; // a cluster: any node relays every PUBLISH
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, backoff, [this] { return stop_; });
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, kMaxBackoff);
    }
  }

  static bool flush(redisContext* ctx) {
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(ctx, &done) != REDIS_OK) {
        return false;
      }
    }
    return true;
  }

  // Reads until the connection fails or the subscription stops; true when
  // the SUBSCRIBE was confirmed (Redis was up).
  bool listen(redis::Connection& conn) {
    redisContext* ctx = conn.context();
    RedisCommand subscribe{"SUBSCRIBE"};
    subscribe.insert(subscribe.end(), channels_.begin(), channels_.end());
    if (!conn.send(subscribe) || !flush(ctx)) {
      return false;
    }
    bool confirmed = false;
    auto last_heard = Clock::now();
    bool ping_sent = false;
    while (!stopping()) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) {
        return confirmed;
      }
      if (raw != nullptr) {
        const RedisReply reply = redis::to_reply(static_cast<redisReply*>(raw));
        freeReplyObject(raw);
        confirmed = true;
        last_heard = Clock::now();
        ping_sent = false;
        deliver(reply);
        continue;
      }
      pollfd fd{ctx->fd, POLLIN, 0};
      const int ready = poll(&fd, 1, static_cast<int>(kPoll.count()));
      if (ready < 0 && errno != EINTR) {
        return confirmed;
      }
      if (ready > 0) {
        if (redisBufferRead(ctx) != REDIS_OK) {
          return confirmed; // closed (Redis restarted or killed)
        }
        continue;
      }
      const auto idle = Clock::now() - last_heard;
      if (!ping_sent && idle > kIdleBeforePing) {
        if (!conn.send({"PING"}) || !flush(ctx)) {
          return confirmed;
        }
        ping_sent = true;
      } else if (ping_sent && idle > kIdleBeforePing + std::max<std::chrono::milliseconds>(
                                                           options_.op_timeout, kIdleBeforePing)) {
        spdlog::debug("redis subscription {}: no answer to PING, reconnecting",
                      redacted_url(options_));
        return confirmed;
      }
    }
    return confirmed;
  }

  void deliver(const RedisReply& reply) {
    // ["message", channel, payload]; subscribe confirmations and PING's
    // ["pong", ""] only prove the connection alive.
    if (reply.type == RedisReply::Type::kArray && reply.elements.size() == 3 &&
        reply.elements[0].str == "message" && on_message_) {
      on_message_(reply.elements[1].str, reply.elements[2].str);
    }
  }

  const RedisOptions options_;
  const std::vector<std::string> channels_;
  const Handler on_message_;
  std::vector<redis::Endpoint> endpoints_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_; // last: started once everything above is built
};

} // namespace

RedisSubscription::~RedisSubscription() = default;

std::unique_ptr<RedisSubscription>
RedisSubscription::start(RedisOptions options, std::vector<std::string> channels,
                         std::function<void(std::string_view, std::string_view)> on_message) {
  return std::make_unique<Subscription>(std::move(options), std::move(channels),
                                        std::move(on_message));
}

} // namespace kcache::storage
