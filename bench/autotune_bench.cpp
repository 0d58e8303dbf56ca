// autotune_bench: successive halving against exhaustive search, through a
// real kcached on this CPU, for the blocked matmul search of
// bench/autotune/matmul_search.json. The variants compile once (the first
// search); each strategy is then a search job of its own that reuses them.
// Printed as ratios, halving / exhaustive: the search's benchmark time, and
// the winner's time (both winners as timed by the exhaustive search, so one
// measurement decides).
//
//   autotune_bench [SEARCH.json] [--rounds N]

#include "kcached_process.h"
#include "search_file.h"

#include <kcache/client/client.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

namespace {

using namespace kcache;
using nlohmann::json;
namespace fs = std::filesystem;

struct Outcome {
  json table;
  double wall_s = 0;
};

Outcome search(client::Client& c, json spec, const std::string& strategy, int round) {
  spec["autotune"]["strategy"] = {{"kind", strategy}};
  // A different search per round (the field is not read, but keys the search):
  // every round benchmarks afresh, and compiles nothing.
  spec["autotune"]["bench_round"] = round;
  json body{{"key", "autotune-bench-" + strategy + "-" + std::to_string(round)}, {"spec", spec}};
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
  const Outcome warm = search(*c, spec, "exhaustive", 0);
  std::printf("autotune_bench: %s, %zu variants (compiled once, in %.1f s with the first search)\n",
              path.filename().c_str(), warm.table["rows"].size(), warm.wall_s);
  std::printf("\n| round | exhaustive: search s | winner | halving: search s | winner | "
              "search time ratio | winner time ratio |\n|---|---|---|---|---|---|---|\n");
  double search_ratio_sum = 0, winner_ratio_sum = 0;
  for (int r = 1; r <= rounds; ++r) {
    const Outcome ex = search(*c, spec, "exhaustive", r);
    const Outcome hv = search(*c, spec, "halving", r);
    const std::string ex_winner = ex.table["winner"], hv_winner = hv.table["winner"];
    const double search_ratio =
        hv.table["bench_seconds"].get<double>() / ex.table["bench_seconds"].get<double>();
    const double winner_ratio = time_of(ex.table, hv_winner) / time_of(ex.table, ex_winner);
    search_ratio_sum += search_ratio;
    winner_ratio_sum += winner_ratio;
    std::printf("| %d | %.2f | %s | %.2f | %s | %.2fx | %.2fx |\n", r,
                ex.table["bench_seconds"].get<double>(), ex_winner.c_str(),
                hv.table["bench_seconds"].get<double>(), hv_winner.c_str(), search_ratio,
                winner_ratio);
  }
  std::printf("\nmean over %d rounds, halving / exhaustive: search time %.2fx, winner time %.2fx\n",
              rounds, search_ratio_sum / rounds, winner_ratio_sum / rounds);
  return 0;
}
