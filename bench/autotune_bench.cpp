// autotune_bench: successive halving (as in session 28, and now with early
// discard and no first-round warm-up) against exhaustive search, through a
// real kcached on this CPU, for the blocked matmul search of
// bench/autotune/matmul_search.json. The variants compile once (the first
// search); each strategy is then a search job of its own that reuses them.
// Printed as ratios, halving / exhaustive, per round and their medians: the search's benchmark
// time, and the winner's time (both winners as timed by the exhaustive search, so one measurement
// decides).
//
//   autotune_bench [SEARCH.json] [--rounds N]

#include "kcached_process.h"
#include "search_file.h"

#include <kcache/client/client.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <vector>

namespace {

using namespace kcache;
using nlohmann::json;
namespace fs = std::filesystem;

struct Outcome {
  json table;
  double wall_s = 0;
};

Outcome search(client::Client& c, json spec, const std::string& label, json strategy, int round) {
  // A different search per round (the seed is read by random-k only, but it
  // keys the search): every round benchmarks afresh, and compiles nothing.
  strategy["seed"] = round + 1;
  spec["autotune"]["strategy"] = std::move(strategy);
  json body{{"key", "autotune-bench-" + label + "-" + std::to_string(round)}, {"spec", spec}};
  const auto start = std::chrono::steady_clock::now();
  auto res = c.request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
  const json answer = res ? json::parse(res->body, nullptr, false) : json();
  if (!answer.is_object() || !answer.contains("job")) {
    std::fprintf(stderr, "submit failed: %s\n",
                 res ? res->body.c_str() : res.error().message.c_str());
    std::exit(1);
  }
  auto job = c.job(answer["job"]["id"].get<std::string>(), std::chrono::minutes(10));
  if (!job || job->state != kcache::client::JobState::kSucceeded) {
    std::fprintf(stderr, "search failed: %s\n",
                 job ? job->json.c_str() : job.error().message.c_str());
    std::exit(1);
  }
  Outcome out;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto artifact = c.get(body["key"].get<std::string>());
  const json record = json::parse((*artifact)->record_json);
  out.table = json::parse(record["metadata"]["autotune_table"].get<std::string>());
  return out;
}

double time_of(const json& table, const std::string& id) {
  for (const json& row : table["rows"]) {
    if (row["id"] == id) {
      return row.value("median_us", 0.0);
    }
  }
  return 0;
}

std::size_t count_status(const json& table, const std::string& status) {
  std::size_t n = 0;
  for (const json& row : table["rows"]) {
    n += row["status"] == status ? 1 : 0;
  }
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) {
    return 0;
  }
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

} // namespace

int main(int argc, char** argv) {
  fs::path path = fs::path(KCACHE_SOURCE_DIR) / "bench/autotune/matmul_search.json";
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      path = argv[i];
    }
  }
  const auto loaded = bench::load_search_file(path);
  if (!loaded) {
    std::fprintf(stderr, "%s: not an autotune spec\n", path.c_str());
    return 2;
  }
  const json& spec = *loaded;
  testing::KcachedProcess kcached({"--log-level", "warn"});
  client::ClientOptions o;
  o.url = kcached.url();
  o.timeout = std::chrono::seconds(30);
  auto c = std::move(*client::Client::create(o));

  // The first search compiles the variants; its timing is not compared.
  const json exhaustive{{"kind", "exhaustive"}};
  // Halving as it was before early discard (session 28): a warm-up before
  // the first round's single timed run, no discard.
  const json halving_s28{{"kind", "halving"}, {"discard", 0}, {"first_warmup", 1}};
  const json halving{{"kind", "halving"}}; // the defaults: discard 2x, no first warm-up
  const Outcome warm = search(*c, spec, "exhaustive", exhaustive, 0);
  std::printf("autotune_bench: %s, %zu variants: compiled (on the worker pool) and timed once in "
              "%.1f s, of which %.1f s timing\n",
              path.filename().c_str(), warm.table["rows"].size(), warm.wall_s,
              warm.table["bench_seconds"].get<double>());
  std::printf("\n| round | exhaustive: search s | runs | winner | halving (s28): search s | runs | "
              "winner | halving: search s | runs | discarded | winner | search time ratio (s28 "
              "/ now) | winner time ratio (s28 / now) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<double> search_old, search_new, winner_old, winner_new;
  json last_ex, last_old, last_new;
  for (int r = 1; r <= rounds; ++r) {
    const Outcome ex = search(*c, spec, "exhaustive", exhaustive, r);
    const Outcome old = search(*c, spec, "halving-s28", halving_s28, r);
    const Outcome hv = search(*c, spec, "halving", halving, r);
    const std::string ex_winner = ex.table["winner"], old_winner = old.table["winner"],
                      hv_winner = hv.table["winner"];
    const double ex_s = ex.table["bench_seconds"].get<double>();
    last_ex = ex.table["round_seconds"];
    last_old = old.table["round_seconds"];
    last_new = hv.table["round_seconds"];
    search_old.push_back(old.table["bench_seconds"].get<double>() / ex_s);
    search_new.push_back(hv.table["bench_seconds"].get<double>() / ex_s);
    winner_old.push_back(time_of(ex.table, old_winner) / time_of(ex.table, ex_winner));
    winner_new.push_back(time_of(ex.table, hv_winner) / time_of(ex.table, ex_winner));
    std::printf(
        "| %d | %.2f | %zu | %s | %.2f | %zu | %s | %.2f | %zu | %zu | %s | %.2fx / %.2fx | "
        "%.3fx / %.3fx |\n",
        r, ex_s, ex.table["timed_runs"].get<std::size_t>(), ex_winner.c_str(),
        old.table["bench_seconds"].get<double>(), old.table["timed_runs"].get<std::size_t>(),
        old_winner.c_str(), hv.table["bench_seconds"].get<double>(),
        hv.table["timed_runs"].get<std::size_t>(), count_status(hv.table, "discarded"),
        hv_winner.c_str(), search_old.back(), search_new.back(), winner_old.back(),
        winner_new.back());
  }
  std::printf("\nlast round's bench seconds per search round: exhaustive %s; halving (s28) %s; "
              "halving %s\n",
              last_ex.dump().c_str(), last_old.dump().c_str(), last_new.dump().c_str());
  std::printf("\nmedian over %d rounds, / exhaustive: halving (s28) search time %.2fx, winner "
              "time %.3fx; halving search time %.2fx, winner time %.3fx\n",
              rounds, median(search_old), median(winner_old), median(search_new),
              median(winner_new));
  return 0;
}
