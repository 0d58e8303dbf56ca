#include <kcache/service/job.h>
#include <kcache/service/lease_table_redis.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

namespace {

// The fencing counter outlives any lease on its key (600 s at most) by far,
// and goes away with the key's last use.
constexpr std::string_view kSequenceTtlMs = "86400000";

// KEYS: lease, sequence. ARGV: holder, ttl ms, nonce.
// -> {granted (0|1), "<token> <holder>", ms left}
constexpr std::string_view kAcquire = R"lua(
local current = redis.call('GET', KEYS[1])
if current then
  return {0, current, redis.call('PTTL', KEYS[1])}
end
local seq = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
local value = 'r' .. seq .. '.' .. ARGV[3] .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return {1, value, tonumber(ARGV[2])}
)lua";

// KEYS: lease. ARGV: token, ttl ms. -> 1 when the token holds the lease.
constexpr std::string_view kRenew = R"lua(
local current = redis.call('GET', KEYS[1])
if current and string.sub(current, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// KEYS: lease. ARGV: token, channel, message. -> 1 when released.
constexpr std::string_view kRelease = R"lua(
local current = redis.call('GET', KEYS[1])
if current and string.sub(current, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
)lua";

// A put ends the key's lease whoever holds it, and wakes the other nodes'
// waiters; a put of a key nobody leased costs one round trip and no message.
// KEYS: lease. ARGV: channel, message.
constexpr std::string_view kEndOnPut = R"lua(
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', ARGV[1], ARGV[2])
end
return 0
)lua";

bool is_redis_token(std::string_view token) {
  return token.starts_with(RedisLeaseTable::kTokenPrefix);
}

} // namespace

RedisLeaseTable::RedisLeaseTable(storage::RedisClient& redis,
                                 const storage::RedisOptions& subscription_options,
                                 RedisLeaseOptions options)
    : redis_(redis), options_(options),
      housekeeper_([this](const std::stop_token& stop) { housekeeping_loop(stop); }) {
  if (!subscription_options.host.empty()) {
    events_ = storage::RedisSubscription::start(
        subscription_options, {redis_.key("events")},
        [this](std::string_view /*channel*/, std::string_view message) { on_event(message); });
  }
}

RedisLeaseTable::~RedisLeaseTable() {
  events_.reset(); // no event callback after this
  housekeeper_.request_stop();
  cv_.notify_all();
  if (housekeeper_.joinable()) {
    housekeeper_.join();
  }
  release_all_waiters();
}

std::string RedisLeaseTable::lease_key(const std::string& key) const {
  return redis_.key("lease:{" + key + "}");
}

void RedisLeaseTable::note_outage(std::string_view what, const storage::StoreError& error) {
  if (!outage_logged_.exchange(true)) {
    spdlog::warn("cluster leases: Redis unavailable ({}: {}); leases are node-local until it "
                 "answers",
                 what, error.message);
  }
}

LeaseGrant RedisLeaseTable::acquire(const std::string& key, const std::string& holder,
                                    std::chrono::milliseconds ttl) {
  // A local lease taken during an outage still single-flights this node.
  if (local_.held(key)) {
    return local_.acquire(key, holder, ttl);
  }
  const std::string lease = lease_key(key);
  auto reply =
      redis_.eval(kAcquire, {lease, redis_.key("lease-seq:{" + key + "}")},
                  {holder, std::to_string(ttl.count()), new_job_id(), std::string(kSequenceTtlMs)});
  if (!reply || reply->type != storage::RedisReply::Type::kArray || reply->elements.size() != 3) {
    if (!reply) {
      note_outage("acquire", reply.error());
    } else {
      spdlog::warn("cluster leases: unexpected acquire reply for {}: {}", key, reply->str);
    }
    return local_.acquire(key, holder, ttl);
  }
  outage_logged_ = false;
  const std::string& value = reply->elements[1].str;
  const std::size_t space = value.find(' ');
  LeaseGrant grant;
  grant.granted = reply->elements[0].integer == 1;
  grant.holder = space == std::string::npos ? "" : value.substr(space + 1);
  grant.expires_in = std::chrono::milliseconds(std::max<long long>(0, reply->elements[2].integer));
  if (grant.granted) {
    grant.token = value.substr(0, space);
  }
  return grant;
}

bool RedisLeaseTable::renew(const std::string& key, const std::string& token,
                            std::chrono::milliseconds ttl) {
  if (!is_redis_token(token)) {
    return local_.renew(key, token, ttl);
  }
  auto reply = redis_.eval(kRenew, {lease_key(key)}, {token, std::to_string(ttl.count())});
  if (!reply) {
    note_outage("renew", reply.error());
  }
  return reply && reply->integer == 1;
}

bool RedisLeaseTable::release(const std::string& key, const std::string& token) {
  if (!is_redis_token(token)) {
    return local_.release(key, token);
  }
  auto reply =
      redis_.eval(kRelease, {lease_key(key)}, {token, redis_.key("events"), "lease-end " + key});
  if (!reply) {
    note_outage("release", reply.error());
    return false;
  }
  if (reply->integer != 1) {
    return false;
  }
  wake(key);
  return true;
}

std::optional<bool> RedisLeaseTable::redis_held(const std::string& key) {
  const std::string lease = lease_key(key);
  auto reply = redis_.run(lease, {"EXISTS", lease});
  if (!reply) {
    note_outage("exists", reply.error());
    return std::nullopt;
  }
  return reply->integer == 1;
}

bool RedisLeaseTable::held(const std::string& key) {
  return local_.held(key) || redis_held(key).value_or(false);
}

void RedisLeaseTable::wait_for_put(const std::string& key, Clock::time_point deadline,
                                   std::function<void()> done) {
  if (local_.held(key)) {
    local_.wait_for_put(key, deadline, std::move(done));
    return;
  }
  if (deadline > Clock::now() && redis_held(key).value_or(false)) {
    std::lock_guard lock(mu_);
    waiters_.add(key, deadline, std::move(done));
    waited_keys_.insert(key);
    ++generation_;
    cv_.notify_all();
    return;
  }
  done();
}

void RedisLeaseTable::notify_put(const std::string& key) {
  local_.notify_put(key);
  wake(key);
  // Ending the Redis lease waits out a timeout when Redis stalls, which this
  // put's answer must not (after the tier's own, a trainer's 2 s ran out):
  // the housekeeper sends it. Past kMaxPendingEnds the lease ends by its TTL
  // and the other nodes' waiters, who poll, see that.
  constexpr std::size_t kMaxPendingEnds = 4096;
  std::lock_guard lock(mu_);
  if (ends_.size() < kMaxPendingEnds) {
    ends_.push_back(key);
  }
  ++generation_;
  cv_.notify_all();
}

void RedisLeaseTable::end_leases(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (auto ended =
            redis_.eval(kEndOnPut, {lease_key(key)}, {redis_.key("events"), "put ac " + key});
        !ended) {
      note_outage("end on put", ended.error());
      return; // the rest would wait too: their leases end by their TTL
    }
  }
}

void RedisLeaseTable::release_all_waiters() {
  local_.release_all_waiters();
  Callbacks wake_now;
  {
    std::lock_guard lock(mu_);
    waiters_.take_all([&](const std::string& /*key*/, std::function<void()>&& done) {
      wake_now.push_back(std::move(done));
    });
    waited_keys_.clear();
  }
  for (auto& done : wake_now) {
    done();
  }
}

void RedisLeaseTable::wake(const std::string& key) {
  Callbacks wake_now;
  {
    std::lock_guard lock(mu_);
    waiters_.take(key, [&](const std::string& /*key*/, std::function<void()>&& done) {
      wake_now.push_back(std::move(done));
    });
    waited_keys_.erase(key);
  }
  for (auto& done : wake_now) {
    done();
  }
}

void RedisLeaseTable::on_event(std::string_view message) {
  // "put <area> <key>" (a put on some node) or "lease-end <key>" (a release).
  constexpr std::string_view kPut = "put ac ", kEnd = "lease-end ";
  if (message.starts_with(kPut)) {
    wake(std::string(message.substr(kPut.size())));
  } else if (message.starts_with(kEnd)) {
    wake(std::string(message.substr(kEnd.size())));
  }
}

void RedisLeaseTable::housekeeping_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    const auto next =
        waited_keys_.empty() ? now + std::chrono::seconds(1) : now + options_.poll_interval;
    const std::uint64_t generation = generation_;
    // Ends queued while this thread was out of the lock count too: their
    // notify came before `generation` was read.
    cv_.wait_until(lock, stop, waiters_.earliest(next),
                   [&] { return generation_ != generation || !ends_.empty(); });
    if (stop.stop_requested()) {
      break;
    }
    Callbacks expired;
    waiters_.take_expired(Clock::now(),
                          [&](const std::string& /*key*/, std::function<void()>&& done) {
                            expired.push_back(std::move(done));
                          });
    const std::vector<std::string> keys(waited_keys_.begin(), waited_keys_.end());
    std::vector<std::string> ends;
    ends.swap(ends_);
    lock.unlock();
    for (auto& done : expired) {
      done();
    }
    end_leases(ends);
    // The events may have been missed (a reconnect, Redis Cluster pub/sub on
    // another node): a lease that is gone, or a Redis that cannot say, wakes
    // its waiters, whose get then hits or misses.
    for (const std::string& key : keys) {
      if (!redis_held(key).value_or(false)) {
        wake(key);
      }
    }
    lock.lock();
    // Keys whose waiters all expired stop being polled.
    std::erase_if(waited_keys_, [&](const std::string& key) { return !waiters_.has(key); });
  }
  // Stopping: the leases of the last puts still end now, not at their TTL
  // (end_leases gives up at the first failure: one timeout at most).
  std::vector<std::string> ends;
  ends.swap(ends_);
  lock.unlock();
  end_leases(ends);
}

} // namespace kcache::service
