#include <kcache/compiler/autotune_run.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>

namespace kcache::compiler {

using nlohmann::json;

namespace {

// The search as the bench worker reads it, with this round's repeat count.
std::string with_repeats(const std::string& search_json, int repeats) {
  json doc = protocol::parse_json_or_discarded(search_json);
  if (doc.is_object() && doc.contains("benchmark")) {
    doc["benchmark"]["repeats"] = repeats;
  }
  return protocol::json_text(doc);
}

} // namespace

TuningTable run_search(const AutotuneSearch& search, const Space& space,
                       const std::vector<CompiledVariant>& compiled,
                       const BenchRequest& request_base, const BenchFn& bench) {
  const auto start = std::chrono::steady_clock::now();
  TuningTable table;
  std::map<std::string, std::size_t> row_of;
  for (const PrunedVariant& p : space.pruned) {
    table.rows.push_back({p.variant.id, p.variant.params, "pruned", 0, 0, 0, p.reason});
  }
  std::vector<BenchVariant> candidates;
  for (const CompiledVariant& c : compiled) {
    row_of[c.variant.id] = table.rows.size();
    if (!c.binary) {
      table.rows.push_back({c.variant.id, c.variant.params, "compile-failed", 0, 0, 0, c.error});
      continue;
    }
    table.rows.push_back({c.variant.id, c.variant.params, "ok", 0, 0, 0, ""});
    candidates.push_back({c.variant.id, c.variant.params, *c.binary});
  }

  const bool halving = search.strategy.kind == Strategy::Kind::kHalving;
  // Halving starts cheap (one timed run each) and gives the survivors eta
  // times more per round, up to the benchmark's repeats.
  int repeats = halving ? 1 : search.benchmark.repeats;
  while (!candidates.empty()) {
    BenchRequest request = request_base;
    request.search_json = with_repeats(request_base.search_json, repeats);
    request.variants = candidates;
    request.check = table.benchmarked == 0; // survivors were checked in the first round
    const std::vector<BenchResult> results = bench(request);
    table.benchmarked += candidates.size();
    table.timed_runs += candidates.size() * static_cast<std::size_t>(repeats);
    std::vector<std::pair<double, std::size_t>> ok; // (median, index into candidates)
    for (std::size_t i = 0; i < results.size() && i < candidates.size(); ++i) {
      TuningRow& row = table.rows[row_of.at(candidates[i].id)];
      ++row.rounds;
      row.status = results[i].status;
      row.median_us = results[i].median_us;
      row.max_error = results[i].max_error;
      row.error = results[i].error;
      if (results[i].status == "ok") {
        ok.emplace_back(results[i].median_us, i);
      }
    }
    std::sort(ok.begin(), ok.end());
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!halving || ok.size() <= 1 || elapsed > search.budget.max_seconds) {
      if (!ok.empty()) {
        table.winner = candidates[ok.front().second].id;
      }
      break;
    }
    // Successive halving: the fastest 1/eta go on, measured eta times longer.
    const std::size_t keep = halving_keep(ok.size(), search.strategy.eta);
    std::vector<BenchVariant> next;
    for (std::size_t r = 0; r < ok.size(); ++r) {
      BenchVariant& v = candidates[ok[r].second];
      if (r < keep) {
        next.push_back(std::move(v));
      } else {
        table.rows[row_of.at(v.id)].status = "eliminated";
      }
    }
    candidates = std::move(next);
    repeats = std::min(search.benchmark.repeats, repeats * search.strategy.eta);
  }
  table.bench_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return table;
}

json tuning_table_json(const TuningTable& table) {
  json rows = json::array();
  for (const TuningRow& r : table.rows) {
    json row{{"id", r.id},
             {"params", r.params},
             {"status", r.status},
             {"median_us", r.median_us},
             {"max_error", r.max_error},
             {"rounds", r.rounds}};
    if (!r.error.empty()) {
      row["error"] = r.error;
    }
    rows.push_back(std::move(row));
  }
  return json{{"winner", table.winner ? json(*table.winner) : json(nullptr)},
              {"benchmarked", table.benchmarked},
              {"timed_runs", table.timed_runs},
              {"bench_seconds", table.bench_seconds},
              {"rows", std::move(rows)}};
}

tl::expected<TuningTable, std::string> tuning_table_from_json(const json& doc) {
  try {
    TuningTable t;
    if (doc.contains("winner") && doc["winner"].is_string()) {
      t.winner = doc["winner"].get<std::string>();
    }
    t.benchmarked = protocol::json_integer(doc, "benchmarked", std::size_t{0});
    t.timed_runs = protocol::json_integer(doc, "timed_runs", std::size_t{0});
    t.bench_seconds = doc.value("bench_seconds", 0.0);
    for (const json& r : doc.at("rows")) {
      TuningRow row;
      row.id = r.at("id").get<std::string>();
      for (const auto& [name, value] : r.at("params").items()) {
        row.params[name] = protocol::json_integer<std::int64_t>(value);
      }
      row.status = r.at("status").get<std::string>();
      row.median_us = r.value("median_us", 0.0);
      row.max_error = r.value("max_error", 0.0);
      row.rounds = protocol::json_integer(r, "rounds", 0);
      row.error = r.value("error", std::string());
      t.rows.push_back(std::move(row));
    }
    return t;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("tuning table: ") + e.what());
  }
}

} // namespace kcache::compiler
