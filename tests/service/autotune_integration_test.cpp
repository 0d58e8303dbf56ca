// max-autotune through kcached, for real on the CPU: variants compiled on the
// worker pool, benchmarked in kcache-worker --bench, checked against the
// reference; the winner published with its tuning table.

#include "kcached_process.h"
#include "redis_server.h"
#include "scrape_metric.h"
#include "test_data.h"

#include <kcache/cachekey/hardware.h>
#include <kcache/client/client.h>
#include <kcache/protocol/record_signature.h>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;

std::vector<std::string> worker_args() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--worker-binary", release ? env : testing::built_binary("kcache-worker"),
          "--worker-memory", release ? "4GiB" : "0"};
}

std::unique_ptr<Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::seconds(10);
  return std::move(*Client::create(o));
}

json matmul_spec(const std::string& strategy) {
  return json{{"backend", "cpp"},
              {"source",
               {{"name", "matmul.cpp"}, {"text", testing::test_data("kernels/tiled_matmul.cpp")}}},
              {"name_expressions", {"matmul"}},
              {"options", {"-O2"}},
              {"target", "x86-64-v2"},
              {"output", "shared"},
              {"autotune",
               {{"params", {{"TILE", {1, 4, 16, 32, 64}}, {"UNROLL", {1, 2, 3}}}},
                {"constraints", {"TILE * UNROLL <= 64"}},
                {"benchmark",
                 {{"shapes", {{"M", 128}, {"N", 128}, {"K", 128}}},
                  {"args",
                   {{{"buffer", "A"}, {"count", "M*K"}, {"seed", 1}},
                    {{"buffer", "B"}, {"count", "K*N"}, {"seed", 2}},
                    {{"buffer", "C"}, {"count", "M*N"}, {"output", true}},
                    {{"scalar", "M"}, {"dtype", "i32"}},
                    {{"scalar", "N"}, {"dtype", "i32"}},
                    {{"scalar", "K"}, {"dtype", "i32"}}}},
                  {"reference", {{"TILE", 1}, {"UNROLL", 1}}},
                  {"tolerance", 1e-4},
                  {"warmup", 1},
                  {"repeats", 5}}},
                {"strategy", {{"kind", strategy}}}}}};
}

constexpr const char* kReduce = R"(
extern "C" void sum(const float* x, float* out, int n) {
  float acc[UNROLL];
  for (int j = 0; j < UNROLL; ++j) acc[j] = 0.f;
  int i = 0;
  for (; i + UNROLL <= n; i += UNROLL)
    for (int j = 0; j < UNROLL; ++j) acc[j] += x[i + j];
  float r = 0.f;
  for (int j = 0; j < UNROLL; ++j) r += acc[j];
  for (; i < n; ++i) r += x[i];
  out[0] = r;
}
)";

json reduce_spec() {
  return json{{"backend", "cpp"},
              {"source", {{"name", "sum.cpp"}, {"text", kReduce}}},
              {"name_expressions", {"sum"}},
              {"options", {"-O2"}},
              {"target", "x86-64-v2"},
              {"output", "shared"},
              {"autotune",
               {{"params", {{"UNROLL", {{"pow2", {1, 16}}}}}},
                {"benchmark",
                 {{"shapes", {{"N", 1 << 20}}},
                  {"args",
                   {{{"buffer", "x"}, {"count", "N"}, {"seed", 3}},
                    {{"buffer", "out"}, {"count", "1"}, {"output", true}},
                    {{"scalar", "N"}, {"dtype", "i32"}}}},
                  {"reference", {{"UNROLL", 1}}},
                  {"tolerance", 1e-3},
                  {"repeats", 5}}}}}};
}

// Submits, waits, returns the finished job.
json run(Client& c, const std::string& key, const json& spec) {
  const json body{{"key", key}, {"spec", spec}};
  auto res = c.request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
  EXPECT_TRUE(res.has_value());
  const json answer = json::parse(res->body);
  if (answer["status"] == "cached") {
    return answer;
  }
  EXPECT_EQ(answer["status"], "queued") << answer.dump();
  auto job = c.job(answer["job"]["id"].get<std::string>(), std::chrono::seconds(120));
  EXPECT_TRUE(job.has_value());
  return json::parse(job->json);
}

json table_of(Client& c, const std::string& key) {
  auto artifact = c.get(key);
  EXPECT_TRUE(artifact && *artifact);
  const json record = json::parse((*artifact)->record_json);
  return json::parse(record["metadata"]["autotune_table"].get<std::string>());
}

TEST(Autotune, BlockedMatmulFindsTheFastestCorrectTile) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  const json job = run(*c, "kc1-matmul-tuned", matmul_spec("exhaustive"));
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << kcached.log();
  EXPECT_EQ(job["progress"]["done"], job["progress"]["total"]);

  const json table = table_of(*c, "kc1-matmul-tuned");
  ASSERT_EQ(table["rows"].size(), 15U) << "every point of the space has a row";
  double best = 1e300;
  std::string fastest;
  std::size_t pruned = 0, failed = 0, ok = 0;
  for (const json& row : table["rows"]) {
    const std::string status = row["status"];
    if (status == "pruned") {
      ++pruned;
      EXPECT_EQ(row["rounds"], 0) << "pruned variants are never benchmarked: " << row.dump();
      EXPECT_GT(row["params"]["TILE"].get<int>() * row["params"]["UNROLL"].get<int>(), 64);
    } else if (status == "compile-failed") {
      ++failed;
      EXPECT_EQ(row["params"]["UNROLL"], 3) << row.dump();
      EXPECT_NE(row["error"].get<std::string>().find("clang"), std::string::npos) << row.dump();
    } else {
      ASSERT_EQ(status, "ok") << row.dump();
      ++ok;
      if (row["median_us"].get<double>() < best) {
        best = row["median_us"];
        fastest = row["id"];
      }
    }
  }
  EXPECT_EQ(pruned, 3U); // TILE=64 with UNROLL 2 and 3, TILE=32 with UNROLL 3
  EXPECT_EQ(failed, 3U); // UNROLL=3 with TILE 1, 4, 16
  EXPECT_EQ(ok, 9U);
  EXPECT_EQ(table["winner"], fastest) << "the winner is the fastest of the measured set";

  // The published kernel is the winner, and it computes the product.
  auto artifact = c->get("kc1-matmul-tuned");
  const std::string path = (kcached.dir().path() / "winner.so").string();
  std::ofstream(path, std::ios::binary) << (*artifact)->files.front().data;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using Matmul = void (*)(const float*, const float*, float*, int, int, int);
  auto matmul = reinterpret_cast<Matmul>(::dlsym(handle, "matmul"));
  ASSERT_NE(matmul, nullptr);
  constexpr int n = 37;
  std::vector<float> a(n * n), b(n * n), got(n * n);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 7) - 3;
    b[i] = static_cast<float>(i % 5) - 2;
  }
  matmul(a.data(), b.data(), got.data(), n, n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      float want = 0;
      for (int k = 0; k < n; ++k) {
        want += a[i * n + k] * b[k * n + j];
      }
      ASSERT_EQ(got[i * n + j], want) << i << "," << j;
    }
  }
  ::dlclose(handle);

  // The same search on the same hardware: a hit, nothing runs.
  EXPECT_EQ(run(*c, "kc1-matmul-tuned", matmul_spec("exhaustive"))["status"], "cached");
  // Other hardware is another node's work: this one says so.
  json body{
      {"key", "kc1-elsewhere"}, {"spec", matmul_spec("exhaustive")}, {"tuning_class", "cpu:x"}};
  auto elsewhere =
      c->request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
  ASSERT_TRUE(elsewhere.has_value());
  EXPECT_EQ(elsewhere->status, 503);
  EXPECT_NE(elsewhere->body.find("not cpu:x"), std::string::npos) << elsewhere->body;

  // `kcache show` prints the tuning table.
  std::string out;
  ASSERT_EQ(testing::run_command({testing::built_binary("kcache"), "--url", kcached.url(), "show",
                                  "kc1-matmul-tuned"},
                                 out),
            0)
      << out;
  EXPECT_NE(out.find("compile-failed"), std::string::npos) << out;
  EXPECT_NE(out.find("pruned"), std::string::npos) << out;
  EXPECT_NE(out.find("winner"), std::string::npos) << out;
}

TEST(Autotune, ReductionUnrollAndHalvingMatchesExhaustive) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  const json reduce = run(*c, "kc1-sum-tuned", reduce_spec());
  ASSERT_EQ(reduce["state"], "succeeded") << reduce.dump(2);
  const json reduce_table = table_of(*c, "kc1-sum-tuned");
  EXPECT_EQ(reduce_table["rows"].size(), 5U);
  for (const json& row : reduce_table["rows"]) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
  }

  const json exhaustive = run(*c, "kc1-mm-exhaustive", matmul_spec("exhaustive"));
  const json halving = run(*c, "kc1-mm-halving", matmul_spec("halving"));
  ASSERT_EQ(exhaustive["state"], "succeeded");
  ASSERT_EQ(halving["state"], "succeeded") << halving.dump(2);
  const json te = table_of(*c, "kc1-mm-exhaustive");
  const json th = table_of(*c, "kc1-mm-halving");
  // Halving makes fewer timed runs and keeps benchmarking its survivors to the
  // last round. Whether its winner is as fast as exhaustive's is a timing
  // claim, so it lives in bench/autotune_bench (ratios over repeated rounds);
  // on a loaded 2-core CI host two runs of one variant differ by more than
  // any bound a test could assert.
  EXPECT_LT(th["timed_runs"].get<int>(), te["timed_runs"].get<int>());
  int last_round = 0;
  for (const json& row : th["rows"]) {
    last_round = std::max(last_round, row["rounds"].get<int>());
  }
  bool winner_ran_to_the_end = false;
  for (const json& row : th["rows"]) {
    if (row["id"] == th["winner"]) {
      EXPECT_EQ(row["status"], "ok") << row.dump();
      winner_ran_to_the_end = row["rounds"] == last_round;
    }
  }
  EXPECT_TRUE(winner_ran_to_the_end) << th.dump(2);
  // Both searches rank the same candidates: the winner of each is a variant
  // the other measured successfully.
  auto status_in = [](const json& table, const json& id) {
    for (const json& row : table["rows"]) {
      if (row["id"] == id) {
        return row["status"].get<std::string>();
      }
    }
    return std::string("absent");
  };
  EXPECT_EQ(status_in(te, th["winner"]), "ok");
  EXPECT_NE(status_in(th, te["winner"]), "compile-failed");
  bool dropped = false; // by halving, or discarded early as clearly slower
  for (const json& row : th["rows"]) {
    dropped |= row["status"] == "eliminated" || row["status"] == "discarded";
  }
  EXPECT_TRUE(dropped) << th.dump(2);
}

// A kernel that takes MS milliseconds (it sleeps: the same on a loaded host).
constexpr const char* kNap = R"(
extern "C" int usleep(unsigned);
extern "C" void nap(float* out, int n) {
  usleep(MS * 1000);
  out[0] = static_cast<float>(n);
}
)";

json nap_spec(const json& ms, const json& strategy, const json& budget) {
  json spec{{"backend", "cpp"},
            {"source", {{"name", "nap.cpp"}, {"text", kNap}}},
            {"name_expressions", {"nap"}},
            {"options", {"-O1"}},
            {"target", "x86-64-v2"},
            {"output", "shared"},
            {"autotune",
             {{"params", {{"MS", ms}}},
              {"benchmark",
               {{"args",
                 {{{"buffer", "out"}, {"count", "1"}, {"output", true}},
                  {{"scalar", "7"}, {"dtype", "i32"}}}},
                {"reference", {{"MS", 1}}},
                {"warmup", 0},
                {"repeats", 2}}},
              {"strategy", strategy}}}};
  if (!budget.is_null()) {
    spec["autotune"]["budget"] = budget;
  }
  return spec;
}

const json& row_of(const json& table, const std::string& id) {
  for (const json& row : table["rows"]) {
    if (row["id"] == id) {
      return row;
    }
  }
  static const json kNone;
  return kNone;
}

// Halving drops a variant made slow on purpose after its first timed run
// (it is 100x the best, over the default 2x) and keeps the fastest.
TEST(Autotune, EarlyDiscardDropsTheSlowVariantAndKeepsTheFastest) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  const json job = run(*c, "kc1-nap-discard", nap_spec({1, 100}, {{"kind", "halving"}}, nullptr));
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << kcached.log();
  const json t = table_of(*c, "kc1-nap-discard");
  EXPECT_EQ(t["winner"], "MS=1") << t.dump(2);
  const json& slow = row_of(t, "MS=100");
  EXPECT_EQ(slow["status"], "discarded") << t.dump(2);
  EXPECT_EQ(slow["rounds"], 1);
  EXPECT_NE(slow.value("error", "").find("over 2x the best"), std::string::npos) << slow.dump();
}

// The budget runs out inside the (only) round of an exhaustive search: the
// bench worker is stopped there, the best timed variant wins, and the table
// says which variants were not timed and why.
TEST(Autotune, TheBudgetStopsASearchInsideARoundAndSaysSo) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  // Timed in order: MS=1 first (milliseconds), then 150-210 ms naps, three
  // calls each (2 timed, 1 checked): about 3.8 s in all, over the 1 s budget.
  const json job = run(*c, "kc1-nap-budget",
                       nap_spec({1, 150, 160, 170, 180, 190, 200, 210}, {{"kind", "exhaustive"}},
                                {{"max_seconds", 1}}));
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << kcached.log();
  const json t = table_of(*c, "kc1-nap-budget");
  EXPECT_EQ(t["winner"], "MS=1") << t.dump(2);
  EXPECT_NE(t.value("stopped", "").find("budget of 1 s ran out in round 1"), std::string::npos)
      << t.dump(2);
  const json& last = row_of(t, "MS=210");
  EXPECT_EQ(last["status"], "not-timed") << t.dump(2);
  EXPECT_EQ(last.value("error", ""), "not timed: the search's budget of 1 s ran out");
  EXPECT_LT(t["bench_seconds"].get<double>(), 3.5) << "stopped, not run to the end";
}

// Halving checks outputs only in its finalists' round; when the budget ends
// the search in round 1, the fastest variant was never checked. Its check
// runs past the budget (an allowance of its own), so the search still
// publishes a checked winner rather than none.
TEST(Autotune, ABudgetEndingHalvingBeforeItsFinalistsStillPublishesACheckedWinner) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  const json job = run(*c, "kc1-nap-halving-budget",
                       nap_spec({1, 150, 160, 170, 180, 190, 200, 210}, {{"kind", "halving"}},
                                {{"max_seconds", 1}}));
  ASSERT_EQ(job["state"], "succeeded") << job.dump(2) << kcached.log();
  const json t = table_of(*c, "kc1-nap-halving-budget");
  EXPECT_EQ(t["winner"], "MS=1") << t.dump(2);
  EXPECT_NE(t.value("stopped", "").find("ran out in round 1"), std::string::npos) << t.dump(2);
  EXPECT_EQ(t.value("stopped", "").find("none won"), std::string::npos) << t.dump(2);
  EXPECT_EQ(row_of(t, "MS=1")["status"], "ok") << t.dump(2);
  EXPECT_EQ(row_of(t, "MS=210")["status"], "not-timed") << t.dump(2);
}

// Two nodes of different tuning classes share the cluster tier (a real
// redis-server): the second benchmarks afresh but compiles nothing, because
// every variant is already stored under its compile key.
TEST(Autotune, AnotherTuningClassRebenchmarksWithoutCompiling) {
  testing::RedisServer redis;
  // One signing key for both nodes: each serves the other's (signed) records.
  testing::TempDir keys;
  const std::string key_file = (keys.path() / "cluster.pem").string();
  ASSERT_TRUE(protocol::SigningKey::generate()->save(key_file).has_value());
  std::vector<std::string> a_args = worker_args(), b_args = worker_args();
  for (auto* args : {&a_args, &b_args}) {
    args->insert(args->end(),
                 {"--redis-url", redis.url("namespace=autotune"), "--signing-key", key_file});
  }
  b_args.insert(b_args.end(), {"--tuning-class", "cpu:another-model"});
  KcachedProcess node_a(a_args), node_b(b_args);
  auto a = connect(node_a.url());
  auto b = connect(node_b.url());
  const json on_a = run(*a, "kc1-matmul-a", matmul_spec("exhaustive"));
  ASSERT_EQ(on_a["state"], "succeeded") << on_a.dump(2);
  EXPECT_GT(testing::scrape_metric(*a, R"(kcache_compiles_total{result="succeeded"})"), 0);

  const json on_b = run(*b, "kc1-matmul-b", matmul_spec("exhaustive"));
  ASSERT_EQ(on_b["state"], "succeeded") << on_b.dump(2) << node_b.log();
  EXPECT_EQ(on_b["tuning_class"], "cpu:another-model");
  EXPECT_NE(on_b["tuning_class"], on_a["tuning_class"]);
  EXPECT_EQ(testing::scrape_metric(*b, R"(kcache_compiles_total{result="succeeded"})"), 0)
      << "node B compiled nothing: every variant came from the shared tier";
  const json table = table_of(*b, "kc1-matmul-b");
  EXPECT_EQ(table["rows"].size(), 15U);
  EXPECT_GT(table["benchmarked"].get<int>(), 0) << "but it did benchmark, on its own hardware";
}

TEST(Autotune, CudaSearchesNeedAGpuOnTheServiceHost) {
  if (!cachekey::detect_gpus().empty()) {
    GTEST_SKIP() << "this host has a GPU: scripts/device/gpu_autotune.sh measures CUDA searches";
  }
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  json spec = matmul_spec("exhaustive");
  spec["backend"] = "cuda";
  spec["output"] = "cubin";
  spec["target"] = "sm_90a";
  spec["options"] = json::array(); // NVRTC has no -O2: the spec would be refused
  json body{{"key", "kc1-gemm"}, {"spec", spec}};
  auto res = c->request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("no GPU"), std::string::npos) << res->body;
}

} // namespace
} // namespace kcache
