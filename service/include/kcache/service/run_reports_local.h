#pragma once
// Run reports kept by this node (run_reports.h): in their own RocksDB
// database (<data_dir>/runs), as the job journal is, or in memory for a
// handler without one. The index of every report lives in memory; the
// reports themselves in the database.

#include <kcache/service/run_reports.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rocksdb {
class DB;
}

namespace kcache::service {

class LocalRunReports final : public RunReports {
public:
  // `path` empty: in memory only.
  static tl::expected<std::unique_ptr<LocalRunReports>, std::string>
  open(const std::string& path, RunReportLimits limits = {});
  ~LocalRunReports() override;
  LocalRunReports(const LocalRunReports&) = delete;
  LocalRunReports& operator=(const LocalRunReports&) = delete;

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

  struct PrivateTag {
    explicit PrivateTag() = default;
  };
  LocalRunReports(PrivateTag, std::unique_ptr<rocksdb::DB> db, RunReportLimits limits);

private:
  void load();
  void erase_locked(const std::string& id);
  void evict_locked(std::int64_t now_ms);
  bool expired(const RunReportEntry& entry, std::int64_t now_ms) const;

  std::unique_ptr<rocksdb::DB> db_;
  RunReportLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, RunReportEntry> index_;  // id -> entry; ids sort by (ns, run, rank)
  std::map<std::string, std::string> in_memory_; // id -> report text, without a database
  std::uint64_t total_bytes_ = 0;
};

} // namespace kcache::service
