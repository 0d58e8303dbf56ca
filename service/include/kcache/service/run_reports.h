#pragma once
// Compile reports of torch.compile runs (kcache.torch's _report.py): one JSON
// document per process of a run, under (namespace, run, rank). Kept in their
// own RocksDB database (<data_dir>/runs), as the job journal is, or in memory
// for a handler without one. Bounded: a report's size, the number of reports
// and their bytes, and their age; the oldest go first.

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdb {
class DB;
}

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

class RunReports {
public:
  // `path` empty: in memory only.
  static tl::expected<std::unique_ptr<RunReports>, std::string> open(const std::string& path,
                                                                     RunReportLimits limits = {});
  ~RunReports();
  RunReports(const RunReports&) = delete;
  RunReports& operator=(const RunReports&) = delete;

  const RunReportLimits& limits() const { return limits_; }

  // Stores (or replaces) one rank's report, then drops the oldest reports
  // beyond the limits. `report` is a parsed JSON object.
  tl::expected<void, std::string> put(const std::string& ns, const std::string& run,
                                      const std::string& rank, const nlohmann::json& report,
                                      std::int64_t now_ms);
  // Runs in the namespaces `readable` accepts (only `ns` when set), newest
  // first, at most `limit`.
  std::vector<RunSummary> list(const std::function<bool(std::string_view)>& readable,
                               const std::optional<std::string>& ns, std::size_t limit,
                               std::int64_t now_ms) const;
  // Every rank's report of one run: rank -> the report's JSON text.
  std::map<std::string, std::string> get(const std::string& ns, const std::string& run,
                                         std::int64_t now_ms) const;

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  RunReports(PrivateTag, std::unique_ptr<rocksdb::DB> db, RunReportLimits limits);

private:
  struct Entry {
    std::string ns, run, rank;
    std::int64_t stored_ms = 0;
    std::uint64_t bytes = 0;
    nlohmann::json summary; // started_ms, host, compile_seconds, hits, misses, ...
  };
  static std::string id_of(std::string_view ns, std::string_view run, std::string_view rank);
  static nlohmann::json entry_to_json(const Entry& entry);
  void load();
  void erase_locked(const std::string& id);
  void evict_locked(std::int64_t now_ms);
  bool expired(const Entry& entry, std::int64_t now_ms) const;

  std::unique_ptr<rocksdb::DB> db_;
  RunReportLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> index_;           // id -> entry; ids sort by (ns, run, rank)
  std::map<std::string, std::string> in_memory_; // id -> report text, without a database
  std::uint64_t total_bytes_ = 0;
};

} // namespace kcache::service
