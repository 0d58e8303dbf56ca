#pragma once
// Compile reports of torch.compile runs (kcache.torch's _report.py): one JSON
// document per process of a run, under (namespace, run, rank). RunReports is
// what the /v1/runs routes see; LocalRunReports (run_reports_local.h) keeps
// them on this node, RedisRunReports (run_reports_redis.h) in the cluster's
// Redis, so every node lists every run. Both bound the same things: a report's
// size, the number of reports and their bytes, and their age; the oldest go
// first.

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

struct RunReportLimits {
  std::size_t max_report_bytes = 1 << 20;
  std::size_t max_reports = 2000;
  std::uint64_t max_total_bytes = 256ULL << 20;
  std::int64_t max_age_ms = 30LL * 24 * 3600 * 1000;
};

// One run as `GET /v1/runs` lists it: its ranks' summaries added up.
struct RunSummary {
  std::string ns;
  std::string run;
  std::vector<std::string> ranks;
  std::int64_t started_ms = 0; // the earliest rank's start; else when first stored
  std::int64_t updated_ms = 0; // the latest report's store time
  std::string host;            // the first rank's host
  double compile_seconds = 0;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::int64_t recompiles = 0;
  std::int64_t graph_breaks = 0;
};
nlohmann::json to_json(const RunSummary& summary);

// A name of a namespace, run or rank: 1-128 of [A-Za-z0-9._:+=-].
bool is_valid_run_name(std::string_view name);

// What an implementation keeps of one report besides its text: what listings
// need, taken once at put.
struct RunReportEntry {
  std::string ns, run, rank;
  std::int64_t stored_ms = 0;
  std::uint64_t bytes = 0;
  nlohmann::json summary; // started_ms, host, compile_seconds, hits, misses, ...

  // (ns, run, rank) joined by a separator no valid name holds: ids sort by
  // run, and one run's ranks share the prefix id_of(ns, run, "").
  static std::string id_of(std::string_view ns, std::string_view run, std::string_view rank);
  // `report` is the parsed JSON object whose text is `bytes` long.
  static RunReportEntry make(const std::string& ns, const std::string& run, const std::string& rank,
                             const nlohmann::json& report, std::uint64_t bytes,
                             std::int64_t now_ms);
  nlohmann::json to_json() const;
  static tl::expected<RunReportEntry, std::string> from_json(const nlohmann::json& j);
};

// Which namespaces a caller may read.
using RunNamespaceFilter = std::function<bool(std::string_view)>;

// The runs of `entries` (in id order) that are not past `max_age_ms`, in the
// namespaces `readable` accepts (only `ns` when set), newest first, at most
// `limit`: what both implementations' list() answer.
std::vector<RunSummary> summarize_runs(const std::map<std::string, RunReportEntry>& entries,
                                       const RunNamespaceFilter& readable,
                                       const std::optional<std::string>& ns, std::size_t limit,
                                       std::int64_t now_ms, std::int64_t max_age_ms);

class RunReports {
public:
  RunReports() = default;
  virtual ~RunReports() = default;
  RunReports(const RunReports&) = delete;
  RunReports& operator=(const RunReports&) = delete;

  virtual const RunReportLimits& limits() const = 0;

  // Stores (or replaces) one rank's report, then drops the oldest reports
  // beyond the limits. `report` is a parsed JSON object. An error: the
  // reports cannot be reached now (the route answers 503).
  virtual tl::expected<void, std::string> put(const std::string& ns, const std::string& run,
                                              const std::string& rank, const nlohmann::json& report,
                                              std::int64_t now_ms) = 0;
  // Runs in the namespaces `readable` accepts (only `ns` when set), newest
  // first, at most `limit`.
  virtual tl::expected<std::vector<RunSummary>, std::string>
  list(const RunNamespaceFilter& readable, const std::optional<std::string>& ns, std::size_t limit,
       std::int64_t now_ms) const = 0;
  // Every rank's report of one run: rank -> the report's JSON text.
  virtual tl::expected<std::map<std::string, std::string>, std::string>
  get(const std::string& ns, const std::string& run, std::int64_t now_ms) const = 0;
};

} // namespace kcache::service
