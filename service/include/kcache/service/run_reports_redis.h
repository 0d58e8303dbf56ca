#pragma once
// Run reports in the cluster's Redis (cluster mode, run_reports.h): a report
// put through any node is listed and read through every node. Keys, under the
// store namespace <ns> and one hash tag (one slot in a Redis Cluster, so each
// put, with the evictions it causes, is one script):
//   <ns>:runs:{runs}:order  sorted set: report id -> stored_ms (oldest first)
//   <ns>:runs:{runs}:index  hash: report id -> RunReportEntry's JSON
//   <ns>:runs:{runs}:text   hash: report id -> the report's JSON text
//   <ns>:runs:{runs}:bytes  the texts' total length
// The limits are the local store's; every put renews the keys' TTL to the age
// limit, so reports nobody adds to any more leave Redis by themselves.
//
// Redis unreachable (down, timeout, breaker open): every call answers an
// error, the route a 503; the node serves everything else as before.

#include <kcache/service/run_reports.h>
#include <kcache/storage/redis_client.h>

#include <atomic>

namespace kcache::service {

class RedisRunReports final : public RunReports {
public:
  // `redis` (the cluster's client, with its timeouts and breaker) must
  // outlive this.
  explicit RedisRunReports(storage::RedisClient& redis, RunReportLimits limits = {});

  const RunReportLimits& limits() const override { return limits_; }
  tl::expected<void, std::string> put(const std::string& ns, const std::string& run,
                                      const std::string& rank, const nlohmann::json& report,
                                      std::int64_t now_ms) override;
  tl::expected<std::vector<RunSummary>, std::string> list(const RunNamespaceFilter& readable,
                                                          const std::optional<std::string>& ns,
                                                          std::size_t limit,
                                                          std::int64_t now_ms) const override;
  tl::expected<std::map<std::string, std::string>, std::string>
  get(const std::string& ns, const std::string& run, std::int64_t now_ms) const override;

private:
  std::string key(std::string_view part) const;
  // A reply that is an error (or Redis unreachable) as the error routes show.
  tl::expected<storage::RedisReply, std::string>
  checked(std::string_view what, storage::Result<storage::RedisReply> reply) const;

  storage::RedisClient& redis_;
  RunReportLimits limits_;
  mutable std::atomic<bool> outage_logged_{false};
};

} // namespace kcache::service
