#include <kcache/service/run_reports_redis.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

using nlohmann::json;

namespace {

// KEYS: order, index, text, bytes. ARGV: id, stored_ms, entry JSON, report
// text, max reports, max total bytes, oldest stored_ms kept, ttl ms.
// Stores (or replaces) one report, then drops what is past the age limit and
// the oldest beyond the count and byte limits, as LocalRunReports does.
constexpr std::string_view kPut = R"lua(
local function drop(id)
  local len = redis.call('HSTRLEN', KEYS[3], id)
  if len > 0 then
    redis.call('DECRBY', KEYS[4], len)
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
drop(ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
redis.call('INCRBY', KEYS[4], string.len(ARGV[4]))
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[7])) do
  drop(id)
end
while redis.call('ZCARD', KEYS[1]) > tonumber(ARGV[5]) or
      tonumber(redis.call('GET', KEYS[4]) or '0') > tonumber(ARGV[6]) do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #oldest == 0 then
    break
  end
  drop(oldest[1])
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], ARGV[8])
end
return 1
)lua";

// KEYS: index, text. ARGV: the run's id prefix. -> {entry JSON, text, ...}
// of the run's reports, read at one instant.
constexpr std::string_view kGet = R"lua(
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, #ARGV[1]) == ARGV[1] then
    local text = redis.call('HGET', KEYS[2], all[i])
    if text then
      out[#out + 1] = all[i + 1]
      out[#out + 1] = text
    end
  end
end
return out
)lua";

} // namespace

RedisRunReports::RedisRunReports(storage::RedisClient& redis, RunReportLimits limits)
    : redis_(redis), limits_(limits) {}

std::string RedisRunReports::key(std::string_view part) const {
  return redis_.key("runs:{runs}:" + std::string(part));
}

tl::expected<storage::RedisReply, std::string>
RedisRunReports::checked(std::string_view what, storage::Result<storage::RedisReply> reply) const {
  if (!reply) {
    if (!outage_logged_.exchange(true)) {
      spdlog::warn("run reports: Redis unavailable ({}: {}); /v1/runs answers 503 until it answers",
                   what, reply.error().message);
    }
    return tl::unexpected("run reports: the cluster's Redis is unavailable: " +
                          reply.error().message);
  }
  if (reply->is_error()) {
    spdlog::warn("run reports: Redis refused {}: {}", what, reply->str);
    return tl::unexpected("run reports: Redis refused " + std::string(what) + ": " + reply->str);
  }
  if (outage_logged_.exchange(false)) {
    spdlog::info("run reports: Redis answers again");
  }
  return std::move(*reply);
}

tl::expected<void, std::string> RedisRunReports::put(const std::string& ns, const std::string& run,
                                                     const std::string& rank, const json& report,
                                                     std::int64_t now_ms) {
  std::string text = report.dump();
  if (text.size() > limits_.max_report_bytes) {
    return tl::unexpected("a run report may be at most " +
                          std::to_string(limits_.max_report_bytes) + " bytes");
  }
  const RunReportEntry entry = RunReportEntry::make(ns, run, rank, report, text.size(), now_ms);
  auto stored =
      checked("put", redis_.eval(kPut, {key("order"), key("index"), key("text"), key("bytes")},
                                 {RunReportEntry::id_of(ns, run, rank), std::to_string(now_ms),
                                  entry.to_json().dump(), std::move(text),
                                  std::to_string(limits_.max_reports),
                                  std::to_string(limits_.max_total_bytes),
                                  std::to_string(now_ms - limits_.max_age_ms),
                                  std::to_string(std::max<std::int64_t>(1, limits_.max_age_ms))}));
  if (!stored) {
    return tl::unexpected(stored.error());
  }
  return {};
}

tl::expected<std::vector<RunSummary>, std::string>
RedisRunReports::list(const RunNamespaceFilter& readable, const std::optional<std::string>& ns,
                      std::size_t limit, std::int64_t now_ms) const {
  auto reply = checked("list", redis_.run(key("index"), {"HGETALL", key("index")}));
  if (!reply) {
    return tl::unexpected(reply.error());
  }
  // HGETALL answers in no order; summarize_runs wants id order.
  std::map<std::string, RunReportEntry> by_id;
  for (std::size_t i = 0; i + 1 < reply->elements.size(); i += 2) {
    auto entry = RunReportEntry::from_json(
        json::parse(reply->elements[i + 1].str, nullptr, /*allow_exceptions=*/false));
    if (entry) {
      by_id.emplace(reply->elements[i].str, std::move(*entry));
    }
  }
  return summarize_runs(by_id, readable, ns, limit, now_ms, limits_.max_age_ms);
}

tl::expected<std::map<std::string, std::string>, std::string>
RedisRunReports::get(const std::string& ns, const std::string& run, std::int64_t now_ms) const {
  auto reply = checked(
      "get", redis_.eval(kGet, {key("index"), key("text")}, {RunReportEntry::id_of(ns, run, "")}));
  if (!reply) {
    return tl::unexpected(reply.error());
  }
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < reply->elements.size(); i += 2) {
    auto entry = RunReportEntry::from_json(
        json::parse(reply->elements[i].str, nullptr, /*allow_exceptions=*/false));
    if (entry && now_ms - entry->stored_ms <= limits_.max_age_ms) {
      out.emplace(entry->rank, std::move(reply->elements[i + 1].str));
    }
  }
  return out;
}

} // namespace kcache::service
