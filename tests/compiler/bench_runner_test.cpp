// Autotune benchmarking in kcache-worker --bench: real variants of a blocked
// matmul template compiled by the worker, timed on a pinned CPU and checked
// against the reference; a wrong variant is caught, a crashing one fails alone.

#include "test_data.h"
#include "test_worker.h"

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/worker_runner.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace kcache::compiler {
namespace {

using testing::worker_binary;

WorkerLimits limits() {
  return WorkerLimits{std::chrono::seconds(60), std::chrono::seconds(60),
                      testing::worker_is_instrumented() ? 0 : 4ULL << 30};
}

constexpr const char* kSearch = R"json({
  "params": {"TILE": [1, 8, 32], "BUG": [0, 1], "CRASH": [0, 1]},
  "constraints": ["!(BUG && CRASH)"],
  "benchmark": {
    "shapes": {"M": 96, "N": 80, "K": 64},
    "args": [{"buffer": "A", "count": "M*K", "seed": 1},
             {"buffer": "B", "count": "K*N", "seed": 2},
             {"buffer": "C", "count": "M*N", "output": true},
             {"scalar": "M", "dtype": "i32"}, {"scalar": "N", "dtype": "i32"},
             {"scalar": "K", "dtype": "i32"}],
    "reference": {"TILE": 1, "BUG": 0, "CRASH": 0},
    "tolerance": 1e-4, "warmup": 1, "repeats": 3
  }
})json";

// The search with `warmup` warm-up calls: the checked outputs come from a
// warm-up call, or without one from the first timed run.
std::string search_with_warmup(int warmup) {
  std::string json = kSearch;
  const std::string from = "\"warmup\": 1";
  json.replace(json.find(from), from.size(), "\"warmup\": " + std::to_string(warmup));
  return json;
}

class BenchRunnerWarmup : public ::testing::TestWithParam<int> {};

TEST_P(BenchRunnerWarmup, TimesVariantsAndIsolatesWrongAndCrashingOnes) {
  auto search = parse_autotune(search_with_warmup(GetParam()));
  ASSERT_TRUE(search.has_value()) << search.error();
  auto space = expand(*search);
  ASSERT_TRUE(space.has_value());
  ASSERT_EQ(space->variants.size(), 9U);
  ASSERT_EQ(space->pruned.size(), 3U);

  CompileSpec base;
  base.backend = Backend::kCpp;
  base.source = {"matmul.cpp", kcache::testing::test_data("kernels/tiled_matmul.cpp")};
  base.options = {"-O2"};
  base.target = "x86-64-v2";
  base.output = OutputKind::kSharedObject;
  WorkerRunner runner(worker_binary(), limits());
  auto compile = [&](const Variant& v) {
    auto out = runner.run(variant_spec(base, v));
    EXPECT_TRUE(out.outcome.has_value()) << v.id << ": " << out.outcome.error().message;
    return out.outcome ? out.outcome->binary : std::string();
  };

  BenchRequest request;
  request.search_json = search->json;
  request.entry = "matmul";
  const Variant reference{search->benchmark.reference, "reference"};
  request.reference = {"reference", reference.params, compile(reference)};
  for (const Variant& v : space->variants) {
    request.variants.push_back({v.id, v.params, compile(v)});
  }
  const auto results = runner.bench(request);
  ASSERT_EQ(results.size(), 9U);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    const Bindings& p = space->variants[i].params;
    EXPECT_EQ(r.id, space->variants[i].id);
    if (p.at("CRASH") == 1) {
      EXPECT_EQ(r.status, "error") << r.id;
      EXPECT_NE(r.error.find("crashed with signal"), std::string::npos) << r.error;
    } else if (p.at("BUG") == 1) {
      EXPECT_EQ(r.status, "wrong") << r.id;
      EXPECT_NEAR(r.max_error, 1.0, 1e-5) << r.id;
    } else {
      EXPECT_EQ(r.status, "ok") << r.id << ": " << r.error;
      EXPECT_GT(r.median_us, 0) << r.id;
      EXPECT_LE(r.min_us, r.median_us) << r.id;
      EXPECT_LT(r.max_error, 1e-3) << r.id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BenchRunner, BenchRunnerWarmup, ::testing::Values(1, 0),
                         // Not `info`: gcc's -Wshadow sees the macro's own parameter of that name.
                         [](const ::testing::TestParamInfo<int>& warmup) {
                           return warmup.param == 0 ? std::string("NoWarmup")
                                                    : std::string("Warmup");
                         });

TEST(BenchRunner, UnusableRequestsFailEveryVariantWithAReason) {
  WorkerRunner runner(worker_binary(), limits());
  BenchRequest request;
  request.search_json = R"({"params": {"T": [1]}, "benchmark": {"args": []}})";
  request.entry = "f";
  request.reference = {"reference", {{"T", 1}}, "not an ELF"};
  request.variants = {{"T=1", {{"T", 1}}, "not an ELF"}};
  auto results = runner.bench(request);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].status, "error");
  EXPECT_NE(results[0].error.find("output buffer"), std::string::npos) << results[0].error;
}

} // namespace
} // namespace kcache::compiler
