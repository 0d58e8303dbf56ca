#include <kcache/compiler/autotune_run.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace kcache::compiler {

using nlohmann::json;

namespace {

// The search as the bench worker reads it, with this round's repeats and warm-up.
std::string with_round(const std::string& search_json, int repeats, int warmup) {
  json doc = protocol::parse_json_or_discarded(search_json);
  if (doc.is_object() && doc.contains("benchmark")) {
    doc["benchmark"]["repeats"] = repeats;
    doc["benchmark"]["warmup"] = warmup;
  }
  return protocol::json_text(doc);
}

std::string us_text(double us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f us", us);
  return text;
}

std::string factor_text(double f) {
  char text[32];
  std::snprintf(text, sizeof text, "%gx", f);
  return text;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

// The best of `ok` (a round's successful variants, fastest first) whose
// outputs were checked; one that was not (the budget ended the search before
// the finalists' round) is checked now, alone. A check that fails marks its
// row and the next one is tried.
std::optional<std::string> first_checked_ok(const std::vector<BenchVariant>& candidates,
                                            const std::vector<std::pair<double, std::size_t>>& ok,
                                            std::set<std::string>& checked, TuningTable& table,
                                            const std::map<std::string, std::size_t>& row_of,
                                            const BenchRequest& request_base,
                                            const BenchFn& bench) {
  for (const auto& [median_us, index] : ok) {
    const BenchVariant& v = candidates[index];
    if (checked.contains(v.id)) {
      return v.id;
    }
    BenchRequest request = request_base;
    request.variants = {v};
    request.check = true;
    const std::vector<BenchResult> results = bench(request, BenchPhase::kWinnerCheck);
    if (!results.empty() && results.front().status == kNotTimed) {
      // Even the check's own allowance ran out: no winner (an unchecked
      // binary is never published).
      table.stopped += "; the fastest variant's check did not finish in its allowance, so none won";
      return std::nullopt;
    }
    checked.insert(v.id);
    TuningRow& row = table.rows[row_of.at(v.id)];
    if (!results.empty() && results.front().status == "ok") {
      row.max_error = results.front().max_error;
      return v.id;
    }
    row.status = results.empty() ? "error" : results.front().status;
    row.error = results.empty() ? "the check run returned nothing" : results.front().error;
  }
  return std::nullopt;
}

} // namespace

TuningTable run_search(const AutotuneSearch& search, const Space& space,
                       const std::vector<CompiledVariant>& compiled,
                       const BenchRequest& request_base, const BenchFn& bench) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
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
  // Halving starts cheap (one timed run each, by default without a warm-up)
  // and gives the survivors eta times more per round, up to the benchmark's
  // repeats.
  int repeats = halving ? 1 : search.benchmark.repeats;
  int round = 0;
  // Halving checks outputs only in its last round (the finalists): a variant
  // that cannot win needs no check, and on a GPU the check (outputs copied
  // back and compared on the host) costs far more than a timed run. Only a
  // checked variant may win.
  std::set<std::string> checked;
  auto finalists = [&](std::size_t n) {
    return !halving || n <= static_cast<std::size_t>(search.strategy.eta);
  };
  while (!candidates.empty()) {
    ++round;
    BenchRequest request = request_base;
    const int warmup =
        halving && round == 1 ? search.strategy.first_warmup : search.benchmark.warmup;
    request.search_json = with_round(request_base.search_json, repeats, warmup);
    request.variants = candidates;
    request.check = finalists(candidates.size()) &&
                    std::any_of(candidates.begin(), candidates.end(),
                                [&](const BenchVariant& v) { return !checked.contains(v.id); });
    const double round_start = elapsed();
    const std::vector<BenchResult> results = bench(request, BenchPhase::kRound);
    table.round_seconds.push_back(elapsed() - round_start);
    std::vector<std::pair<double, std::size_t>> ok; // (median, index into candidates)
    bool cut = false;                               // some not timed: the budget ran out
    for (std::size_t i = 0; i < results.size() && i < candidates.size(); ++i) {
      TuningRow& row = table.rows[row_of.at(candidates[i].id)];
      if (results[i].status == kNotTimed) {
        // The budget ran out mid-round: a survivor keeps its last round's time.
        cut = true;
        row.error = results[i].error;
        if (row.rounds == 0) {
          row.status = kNotTimed;
        } else {
          ok.emplace_back(row.median_us, i);
        }
        continue;
      }
      ++table.benchmarked;
      table.timed_runs += static_cast<std::size_t>(repeats);
      ++row.rounds;
      row.status = results[i].status;
      row.median_us = results[i].median_us;
      row.max_error = results[i].max_error;
      row.error = results[i].error;
      if (request.check && results[i].status != kNotTimed) {
        checked.insert(candidates[i].id);
      }
      if (results[i].status == "ok") {
        ok.emplace_back(results[i].median_us, i);
      }
    }
    std::sort(ok.begin(), ok.end());
    const bool more = halving && ok.size() > 1;
    const bool budget_out = cut || elapsed() > search.budget.max_seconds;
    if (budget_out && (cut || more)) {
      table.stopped = "the budget of " + seconds_text(search.budget.max_seconds) +
                      " ran out in round " + std::to_string(round) +
                      (cut ? ", before every variant of it was timed" : "");
    }
    if (!more || budget_out) {
      table.winner = first_checked_ok(candidates, ok, checked, table, row_of, request_base, bench);
      break;
    }
    // Early discard: a variant far slower than the best is out, whatever the
    // noise of a short round; then successive halving among the rest.
    std::size_t close = ok.size();
    if (search.strategy.discard > 0) {
      const double limit = ok.front().first * search.strategy.discard;
      close = static_cast<std::size_t>(
          std::find_if(ok.begin(), ok.end(), [&](const auto& m) { return m.first > limit; }) -
          ok.begin());
    }
    const std::size_t keep = halving_keep(close, search.strategy.eta);
    std::vector<BenchVariant> next;
    for (std::size_t r = 0; r < ok.size(); ++r) {
      BenchVariant& v = candidates[ok[r].second];
      TuningRow& row = table.rows[row_of.at(v.id)];
      if (r < keep) {
        next.push_back(std::move(v));
      } else if (r < close) {
        row.status = "eliminated";
      } else {
        row.status = "discarded";
        row.error = us_text(ok[r].first) + " in round " + std::to_string(round) + ", over " +
                    factor_text(search.strategy.discard) + " the best (" +
                    us_text(ok.front().first) + ")";
      }
    }
    if (next.size() == 1 && checked.contains(next.front().id)) {
      table.winner = next.front().id; // the last one standing needs no more runs
      break;
    }
    // The last round (the finalists) gets the benchmark's repeats: discard
    // shortens the schedule, and the winner is decided (and checked) there.
    const bool last = finalists(next.size());
    candidates = std::move(next);
    repeats = last ? search.benchmark.repeats
                   : std::min(search.benchmark.repeats, repeats * search.strategy.eta);
  }
  table.bench_seconds = elapsed();
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
              {"stopped", table.stopped},
              {"round_seconds", table.round_seconds},
              {"bench_workers", table.bench_workers},
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
    t.stopped = doc.value("stopped", std::string());
    t.round_seconds = doc.value("round_seconds", std::vector<double>());
    t.bench_workers = protocol::json_integer(doc, "bench_workers", 0);
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
