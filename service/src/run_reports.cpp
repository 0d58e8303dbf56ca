// What both run report stores share: names, the summary a put takes of a
// report, and how listings add ranks up into runs.

#include <kcache/service/run_reports.h>

#include <algorithm>

namespace kcache::service {

using nlohmann::json;

namespace {

// Separates the parts of an id; no valid name holds it.
constexpr char kSep = '\x1f';
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

// What listings show of a report.
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

std::string RunReportEntry::id_of(std::string_view ns, std::string_view run,
                                  std::string_view rank) {
  std::string id;
  id.append(ns).push_back(kSep);
  id.append(run).push_back(kSep);
  id.append(rank);
  return id;
}

RunReportEntry RunReportEntry::make(const std::string& ns, const std::string& run,
                                    const std::string& rank, const json& report,
                                    std::uint64_t bytes, std::int64_t now_ms) {
  return RunReportEntry{ns, run, rank, now_ms, bytes, summarize(report)};
}

json RunReportEntry::to_json() const {
  return json{{"ns", ns},       {"run", run},        {"rank", rank}, {"stored_ms", stored_ms},
              {"bytes", bytes}, {"summary", summary}};
}

tl::expected<RunReportEntry, std::string> RunReportEntry::from_json(const json& j) {
  try {
    return RunReportEntry{j.at("ns").get<std::string>(),      j.at("run").get<std::string>(),
                          j.at("rank").get<std::string>(),    j.at("stored_ms").get<std::int64_t>(),
                          j.at("bytes").get<std::uint64_t>(), j.at("summary")};
  } catch (const json::exception& e) {
    return tl::unexpected(std::string(e.what()));
  }
}

std::vector<RunSummary> summarize_runs(const std::map<std::string, RunReportEntry>& entries,
                                       const RunNamespaceFilter& readable,
                                       const std::optional<std::string>& ns, std::size_t limit,
                                       std::int64_t now_ms, std::int64_t max_age_ms) {
  std::vector<RunSummary> runs;
  // In id order, one run's ranks are adjacent.
  for (const auto& [id, e] : entries) {
    if ((ns && e.ns != *ns) || now_ms - e.stored_ms > max_age_ms || !readable(e.ns)) {
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

} // namespace kcache::service
