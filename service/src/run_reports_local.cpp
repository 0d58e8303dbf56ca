#include "small_rocksdb.h"

#include <kcache/service/run_reports_local.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

using nlohmann::json;

namespace {

constexpr std::string_view kIndexPrefix = "i";  // i<id>: the entry's index record
constexpr std::string_view kReportPrefix = "r"; // r<id>: the report itself

} // namespace

LocalRunReports::LocalRunReports(PrivateTag, std::unique_ptr<rocksdb::DB> db,
                                 RunReportLimits limits)
    : db_(std::move(db)), limits_(limits) {}

LocalRunReports::~LocalRunReports() = default;

tl::expected<std::unique_ptr<LocalRunReports>, std::string>
LocalRunReports::open(const std::string& path, RunReportLimits limits) {
  std::unique_ptr<rocksdb::DB> db;
  if (!path.empty()) {
    auto opened = open_small_rocksdb(path, "run reports");
    if (!opened) {
      return tl::unexpected(opened.error());
    }
    db = std::move(*opened);
  }
  auto reports = std::make_unique<LocalRunReports>(PrivateTag{}, std::move(db), limits);
  reports->load();
  return reports;
}

void LocalRunReports::load() {
  if (!db_) {
    return;
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kIndexPrefix); it->Valid() && it->key().starts_with(kIndexPrefix); it->Next()) {
    auto entry = RunReportEntry::from_json(
        json::parse(it->value().ToStringView(), nullptr, /*allow_exceptions=*/false));
    if (!entry) {
      spdlog::warn("run reports: skipping an unreadable index record: {}", entry.error());
      continue;
    }
    total_bytes_ += entry->bytes;
    index_.emplace(RunReportEntry::id_of(entry->ns, entry->run, entry->rank), std::move(*entry));
  }
}

bool LocalRunReports::expired(const RunReportEntry& entry, std::int64_t now_ms) const {
  return now_ms - entry.stored_ms > limits_.max_age_ms;
}

void LocalRunReports::erase_locked(const std::string& id) {
  const auto it = index_.find(id);
  if (it == index_.end()) {
    return;
  }
  total_bytes_ -= it->second.bytes;
  index_.erase(it);
  in_memory_.erase(id);
  if (db_) {
    rocksdb::WriteBatch batch;
    batch.Delete(std::string(kIndexPrefix) + id);
    batch.Delete(std::string(kReportPrefix) + id);
    if (const auto status = db_->Write(rocksdb::WriteOptions(), &batch); !status.ok()) {
      spdlog::warn("run reports: cannot drop a report: {}", status.ToString());
    }
  }
}

void LocalRunReports::evict_locked(std::int64_t now_ms) {
  std::vector<std::pair<std::int64_t, std::string>> by_age; // oldest first
  by_age.reserve(index_.size());
  for (const auto& [id, entry] : index_) {
    by_age.emplace_back(entry.stored_ms, id);
  }
  std::sort(by_age.begin(), by_age.end());
  for (const auto& [stored_ms, id] : by_age) {
    const bool over = index_.size() > limits_.max_reports || total_bytes_ > limits_.max_total_bytes;
    if (!over && now_ms - stored_ms <= limits_.max_age_ms) {
      break;
    }
    erase_locked(id);
  }
}

tl::expected<void, std::string> LocalRunReports::put(const std::string& ns, const std::string& run,
                                                     const std::string& rank, const json& report,
                                                     std::int64_t now_ms) {
  std::string text = report.dump();
  if (text.size() > limits_.max_report_bytes) {
    return tl::unexpected("a run report may be at most " +
                          std::to_string(limits_.max_report_bytes) + " bytes");
  }
  RunReportEntry entry = RunReportEntry::make(ns, run, rank, report, text.size(), now_ms);
  const std::string id = RunReportEntry::id_of(ns, run, rank);
  const std::lock_guard lock(mu_);
  if (db_) {
    rocksdb::WriteBatch batch;
    batch.Put(std::string(kIndexPrefix) + id, entry.to_json().dump());
    batch.Put(std::string(kReportPrefix) + id, text);
    if (const auto status = db_->Write(rocksdb::WriteOptions(), &batch); !status.ok()) {
      return tl::unexpected("run reports: " + status.ToString());
    }
  } else {
    in_memory_[id] = std::move(text);
  }
  if (const auto old = index_.find(id); old != index_.end()) {
    total_bytes_ -= old->second.bytes;
  }
  total_bytes_ += entry.bytes;
  index_[id] = std::move(entry);
  evict_locked(now_ms);
  return {};
}

tl::expected<std::vector<RunSummary>, std::string>
LocalRunReports::list(const RunNamespaceFilter& readable, const std::optional<std::string>& ns,
                      std::size_t limit, std::int64_t now_ms) const {
  const std::lock_guard lock(mu_);
  return summarize_runs(index_, readable, ns, limit, now_ms, limits_.max_age_ms);
}

tl::expected<std::map<std::string, std::string>, std::string>
LocalRunReports::get(const std::string& ns, const std::string& run, std::int64_t now_ms) const {
  std::map<std::string, std::string> out;
  const std::string prefix = RunReportEntry::id_of(ns, run, "");
  const std::lock_guard lock(mu_);
  for (auto it = index_.lower_bound(prefix); it != index_.end() && it->first.starts_with(prefix);
       ++it) {
    if (expired(it->second, now_ms)) {
      continue;
    }
    std::string text;
    if (db_) {
      if (!db_->Get(rocksdb::ReadOptions(), std::string(kReportPrefix) + it->first, &text).ok()) {
        continue;
      }
    } else if (const auto found = in_memory_.find(it->first); found != in_memory_.end()) {
      text = found->second;
    }
    out.emplace(it->second.rank, std::move(text));
  }
  return out;
}

} // namespace kcache::service
