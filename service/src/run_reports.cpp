#include <kcache/service/run_reports.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

using nlohmann::json;

namespace {

// Separates the parts of a database key; no valid name holds it.
constexpr char kSep = '\x1f';
constexpr std::string_view kIndexPrefix = "i";  // i<id>: the entry's index record
constexpr std::string_view kReportPrefix = "r"; // r<id>: the report itself
constexpr std::size_t kMaxHostChars = 256;

// A number of the (untrusted) report, or 0.
double number_at(const json& object, std::string_view key) {
  if (!object.is_object()) {
    return 0;
  }
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0;
}

std::int64_t count_at(const json& object, std::string_view key) {
  const double value = number_at(object, key);
  return value > 0 && value < 9e15 ? static_cast<std::int64_t>(value) : 0;
}

// What listings show of a report, taken once at put.
json summarize(const json& report) {
  json summary = json::object();
  summary["started_ms"] = count_at(report, "started_ms");
  const auto host = report.find("host");
  summary["host"] = host != report.end() && host->is_string()
                        ? host->get<std::string>().substr(0, kMaxHostChars)
                        : std::string();
  const auto totals_it = report.find("totals");
  const json totals = totals_it != report.end() ? *totals_it : json::object();
  summary["compile_seconds"] = std::max(0.0, number_at(totals, "compile_seconds"));
  for (const char* name : {"hits", "misses", "recompiles", "graph_breaks"}) {
    summary[name] = count_at(totals, name);
  }
  return summary;
}

} // namespace

bool is_valid_run_name(std::string_view name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '+' || c == '=' || c == '-';
  });
}

json to_json(const RunSummary& s) {
  return json{{"namespace", s.ns},
              {"run", s.run},
              {"ranks", s.ranks},
              {"started_ms", s.started_ms},
              {"updated_ms", s.updated_ms},
              {"host", s.host},
              {"compile_seconds", s.compile_seconds},
              {"hits", s.hits},
              {"misses", s.misses},
              {"recompiles", s.recompiles},
              {"graph_breaks", s.graph_breaks}};
}

RunReports::RunReports(PrivateTag, std::unique_ptr<rocksdb::DB> db, RunReportLimits limits)
    : db_(std::move(db)), limits_(limits) {}

RunReports::~RunReports() = default;

tl::expected<std::unique_ptr<RunReports>, std::string> RunReports::open(const std::string& path,
                                                                        RunReportLimits limits) {
  std::unique_ptr<rocksdb::DB> db;
  if (!path.empty()) {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.write_buffer_size = 4 << 20;
    options.max_open_files = 64;
    options.keep_log_file_num = 2;
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status status = rocksdb::DB::Open(options, path, &raw);
    if (!status.ok()) {
      return tl::unexpected("cannot open the run reports at " + path + ": " + status.ToString());
    }
    db.reset(raw);
  }
  auto reports = std::make_unique<RunReports>(PrivateTag{}, std::move(db), limits);
  reports->load();
  return reports;
}

std::string RunReports::id_of(std::string_view ns, std::string_view run, std::string_view rank) {
  std::string id;
  id.append(ns).push_back(kSep);
  id.append(run).push_back(kSep);
  id.append(rank);
  return id;
}

json RunReports::entry_to_json(const Entry& e) {
  return json{{"ns", e.ns},       {"run", e.run},
              {"rank", e.rank},   {"stored_ms", e.stored_ms},
              {"bytes", e.bytes}, {"summary", e.summary}};
}

void RunReports::load() {
  if (!db_) {
    return;
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kIndexPrefix); it->Valid() && it->key().starts_with(kIndexPrefix); it->Next()) {
    try {
      const json j = json::parse(it->value().ToStringView());
      Entry e{j.at("ns").get<std::string>(),      j.at("run").get<std::string>(),
              j.at("rank").get<std::string>(),    j.at("stored_ms").get<std::int64_t>(),
              j.at("bytes").get<std::uint64_t>(), j.at("summary")};
      total_bytes_ += e.bytes;
      index_.emplace(id_of(e.ns, e.run, e.rank), std::move(e));
    } catch (const json::exception& e) {
      spdlog::warn("run reports: skipping an unreadable index record: {}", e.what());
    }
  }
}

bool RunReports::expired(const Entry& entry, std::int64_t now_ms) const {
  return now_ms - entry.stored_ms > limits_.max_age_ms;
}

void RunReports::erase_locked(const std::string& id) {
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

void RunReports::evict_locked(std::int64_t now_ms) {
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

tl::expected<void, std::string> RunReports::put(const std::string& ns, const std::string& run,
                                                const std::string& rank, const json& report,
                                                std::int64_t now_ms) {
  std::string text = report.dump();
  if (text.size() > limits_.max_report_bytes) {
    return tl::unexpected("a run report may be at most " +
                          std::to_string(limits_.max_report_bytes) + " bytes");
  }
  Entry entry{ns, run, rank, now_ms, text.size(), summarize(report)};
  const std::string id = id_of(ns, run, rank);
  const std::lock_guard lock(mu_);
  if (db_) {
    rocksdb::WriteBatch batch;
    batch.Put(std::string(kIndexPrefix) + id, entry_to_json(entry).dump());
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

std::vector<RunSummary> RunReports::list(const std::function<bool(std::string_view)>& readable,
                                         const std::optional<std::string>& ns, std::size_t limit,
                                         std::int64_t now_ms) const {
  std::vector<RunSummary> runs;
  const std::lock_guard lock(mu_);
  // Ids sort by (namespace, run, rank): one run's ranks are adjacent.
  for (const auto& [id, e] : index_) {
    if ((ns && e.ns != *ns) || expired(e, now_ms) || !readable(e.ns)) {
      continue;
    }
    if (runs.empty() || runs.back().ns != e.ns || runs.back().run != e.run) {
      runs.push_back(RunSummary{e.ns, e.run, {}, 0, 0, e.summary.value("host", ""), 0, 0, 0, 0, 0});
    }
    RunSummary& s = runs.back();
    s.ranks.push_back(e.rank);
    const auto started = e.summary.value("started_ms", std::int64_t{0});
    const auto start = started > 0 ? started : e.stored_ms;
    s.started_ms = s.started_ms == 0 ? start : std::min(s.started_ms, start);
    s.updated_ms = std::max(s.updated_ms, e.stored_ms);
    s.compile_seconds += e.summary.value("compile_seconds", 0.0);
    s.hits += e.summary.value("hits", std::int64_t{0});
    s.misses += e.summary.value("misses", std::int64_t{0});
    s.recompiles += e.summary.value("recompiles", std::int64_t{0});
    s.graph_breaks += e.summary.value("graph_breaks", std::int64_t{0});
  }
  std::sort(runs.begin(), runs.end(),
            [](const RunSummary& a, const RunSummary& b) { return a.updated_ms > b.updated_ms; });
  if (runs.size() > limit) {
    runs.resize(limit);
  }
  return runs;
}

std::map<std::string, std::string> RunReports::get(const std::string& ns, const std::string& run,
                                                   std::int64_t now_ms) const {
  std::map<std::string, std::string> out;
  const std::string prefix = id_of(ns, run, "");
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
