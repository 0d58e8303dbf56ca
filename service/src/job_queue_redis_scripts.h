#pragma once
// The cluster queue's Lua scripts and small helpers (job_queue_redis*.cpp).
// Each script touches one job's keys only (one hash tag: one slot), so it
// runs on Redis Cluster too. A hash field that is absent reads as false.

#include <kcache/service/job.h>
#include <kcache/storage/redis_client.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::service::redis_queue {

// KEYS: job hash, keys set; ARGV: the joining key. "joined" (key added),
// "sealed" (published already: link the key yourself), or the state/"gone".
inline constexpr std::string_view kJoinScript = R"lua(
local st = redis.call('HGET', KEYS[1], 'state')
if not st then return 'gone' end
if st == 'succeeded' or redis.call('HGET', KEYS[1], 'sealed') == '1' then return 'sealed' end
if st ~= 'queued' and st ~= 'running' then return st end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'submissions', 1)
return 'joined'
)lua";

// KEYS: single-flight key; ARGV: the job id that must still own it.
inline constexpr std::string_view kReleaseScript = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua";

// KEYS: job hash; ARGV: final state, job JSON. Cancels a queued job (and
// bumps the token, so a node that claims its entry later skips it).
inline constexpr std::string_view kCancelScript = R"lua(
local st = redis.call('HGET', KEYS[1], 'state')
if st == 'queued' then
  redis.call('HINCRBY', KEYS[1], 'token', 1)
  redis.call('HSET', KEYS[1], 'state', ARGV[1], 'job', ARGV[2])
  return 'cancelled'
end
if st == 'running' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return 'asked'
end
return st or 'gone'
)lua";

// KEYS: job hash; ARGV: node, visibility timeout ms. {token, attempts};
// {0, 0} when the job is finished or unknown (the entry is acked and
// skipped); {-1, 0} when another claim was renewed within the visibility
// timeout (that node runs it). Times are Redis' own (TIME): nodes' clocks
// need not agree.
inline constexpr std::string_view kClaimScript = R"lua(
local st = redis.call('HGET', KEYS[1], 'state')
if st ~= 'queued' and st ~= 'running' then return {0, 0} end
local now = redis.call('TIME')
local ms = now[1] * 1000 + math.floor(now[2] / 1000)
if st == 'running' then
  local at = tonumber(redis.call('HGET', KEYS[1], 'claimed_ms') or '0')
  if ms - at < tonumber(ARGV[2]) then return {-1, 0} end
end
local t = redis.call('HINCRBY', KEYS[1], 'token', 1)
local a = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'state', 'running', 'node', ARGV[1], 'started_ms', ms,
           'claimed_ms', ms)
return {t, a}
)lua";

// KEYS: job hash; ARGV: token. -1: another claim holds it; 1: a cancel was
// asked for; 0: renewed. A hash that is gone (Redis restarted empty) cannot
// say who holds the job: the claim stands.
inline constexpr std::string_view kRenewScript = R"lua(
local t = redis.call('HGET', KEYS[1], 'token')
if not t then return 0 end
if t ~= ARGV[1] then return -1 end
local now = redis.call('TIME')
redis.call('HSET', KEYS[1], 'claimed_ms', now[1] * 1000 + math.floor(now[2] / 1000))
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return 1 end
return 0
)lua";

// KEYS: job hash, keys set; ARGV: token. The keys, or nil when the claim is lost.
inline constexpr std::string_view kSealScript = R"lua(
local t = redis.call('HGET', KEYS[1], 'token')
if t and t ~= ARGV[1] then return false end
redis.call('HSET', KEYS[1], 'sealed', '1')
return redis.call('SMEMBERS', KEYS[2])
)lua";

// KEYS: job hash; ARGV: token, final state, job JSON, TTL ms. 1: written;
// 0: the claim is lost (a newer claim's result stands).
inline constexpr std::string_view kFinishScript = R"lua(
local t = redis.call('HGET', KEYS[1], 'token')
if t and t ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'job', ARGV[3], 'token', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
)lua";

// KEYS: job hash; ARGV: token, done, total. 1: written; 0: the claim is
// lost or the job is no longer running (its final JSON is the last word).
inline constexpr std::string_view kProgressScript = R"lua(
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'state') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'progress_done', ARGV[2], 'progress_total', ARGV[3])
return 1
)lua";

tl::unexpected<storage::StoreError> reply_error(const storage::RedisReply& reply,
                                                std::string_view what);
std::int64_t to_int(std::string_view text);
// The job as its hash keeps it: everything but the spec.
std::string hash_json(const Job& job);

} // namespace kcache::service::redis_queue
