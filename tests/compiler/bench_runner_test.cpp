// Autotune benchmarking in kcache-worker --bench: real variants of a blocked
// matmul template compiled by the worker, timed on a pinned CPU and checked
// against the reference; a wrong variant is caught, a crashing one fails alone.

#include "test_data.h"
#include "test_worker.h"

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/worker_runner.h>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// The blocked matmul's variants compiled once for the session tests below.
class BenchSessionTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto parsed = parse_autotune(kSearch);
    ASSERT_TRUE(parsed.has_value()) << parsed.error();
    search_ = *parsed;
  }
  std::string compile(const Bindings& params, const std::string& source) {
    CompileSpec base;
    base.backend = Backend::kCpp;
    base.source = {"matmul.cpp", source};
    base.options = {"-O2"};
    base.target = "x86-64-v2";
    base.output = OutputKind::kSharedObject;
    auto out = runner_.run(variant_spec(base, Variant{params, "v"}));
    EXPECT_TRUE(out.outcome.has_value()) << out.outcome.error().message;
    return out.outcome ? out.outcome->binary : std::string();
  }
  BenchVariant
  variant(std::int64_t tile, std::int64_t bug, std::int64_t crash,
          const std::string& source = kcache::testing::test_data("kernels/tiled_matmul.cpp")) {
    const Bindings params{{"TILE", tile}, {"BUG", bug}, {"CRASH", crash}};
    return {"TILE=" + std::to_string(tile) + ",BUG=" + std::to_string(bug) +
                ",CRASH=" + std::to_string(crash),
            params, compile(params, source)};
  }
  BenchRequest request(std::vector<BenchVariant> variants, bool check = true) {
    BenchRequest r;
    r.search_json = search_.json;
    r.entry = "matmul";
    r.reference = {"reference", search_.benchmark.reference,
                   compile(search_.benchmark.reference,
                           kcache::testing::test_data("kernels/tiled_matmul.cpp"))};
    r.variants = std::move(variants);
    r.check = check;
    return r;
  }

  WorkerRunner runner_{worker_binary(), limits()};
  AutotuneSearch search_;
};

TEST_F(BenchSessionTest, OneWorkerServesEveryRoundOfASearch) {
  const auto session = runner_.open_bench();
  const BenchVariant a = variant(1, 0, 0), b = variant(8, 0, 0), c = variant(32, 0, 0);
  // Halving's shape: everyone unchecked, then fewer with checks.
  for (const BenchRequest& round : {request({a, b, c}, false), request({b, c}, true),
                                    request({c}, true), request({a, b, c}, true)}) {
    const auto results = session->bench(round, {});
    ASSERT_EQ(results.size(), round.variants.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].id, round.variants[i].id);
      EXPECT_EQ(results[i].status, "ok") << results[i].id << ": " << results[i].error;
      EXPECT_GT(results[i].median_us, 0);
    }
  }
  EXPECT_EQ(session->workers_started(), 1);
}

TEST_F(BenchSessionTest, AVariantThatCrashesItsWorkerCostsOnlyItselfAndLaterRoundsGoOn) {
  const auto session = runner_.open_bench();
  const BenchVariant good = variant(8, 0, 0), crash = variant(1, 0, 1), wrong = variant(32, 1, 0);
  const auto first = session->bench(request({crash, good, wrong}), {});
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(first[0].status, "error");
  EXPECT_NE(first[0].error.find("crashed with signal"), std::string::npos) << first[0].error;
  EXPECT_EQ(first[1].status, "ok") << first[1].error;
  EXPECT_EQ(first[2].status, "wrong");
  // The rest of round one ran in a second worker, which serves round two.
  const auto second = session->bench(request({good}, false), {});
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].status, "ok") << second[0].error;
  EXPECT_EQ(session->workers_started(), 2);
}

TEST_F(BenchSessionTest, AVariantPrintingToStdoutCannotGarbleTheResults) {
  // Prints a result line of its own for itself (claiming 1 us) to stdout, as
  // a kernel's printf would, then computes a wrong product: only the
  // worker's own line counts. (Code in the worker can do worse on purpose:
  // cpu_bench.h says what that costs.)
  const std::string forger = R"cpp(
extern "C" long write(int, const void*, unsigned long);
extern "C" void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  static const char line[] =
      "{\"id\":\"TILE=8,BUG=0,CRASH=0\",\"status\":\"ok\",\"median_us\":1,\"min_us\":1}\n";
  write(1, line, sizeof line - 1);
  for (int i = 0; i < M * N; ++i) C[i] = 7.f + A[0] * B[0] * K;
}
)cpp";
  const auto session = runner_.open_bench();
  const auto results = session->bench(request({variant(8, 0, 0, forger)}), {});
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].status, "wrong") << results[0].error;
  EXPECT_NE(results[0].median_us, 1.0);
}

TEST_F(BenchSessionTest, EachRequestGetsTheCpuLimitAFreshWorkerHas) {
  // A 2 s CPU limit and rounds of 0.6 s CPU each (every call spins 150 ms of
  // the process's CPU time, whatever the machine's speed; a round is a
  // warm-up and 3 timed calls): six rounds outlast the limit unless each
  // round renews it.
  runner_ =
      WorkerRunner(worker_binary(), WorkerLimits{std::chrono::seconds(60), std::chrono::seconds(2),
                                                 limits().memory_bytes});
  const std::string spinner = R"cpp(
extern "C" long clock();
extern "C" void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  const long start = clock(); // CLOCKS_PER_SEC is 1000000 on POSIX
  while (clock() - start < 150000) {
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0.f;
      for (int k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
      C[i * N + j] = sum;
    }
}
)cpp";
  const auto session = runner_.open_bench();
  const BenchVariant v = variant(8, 0, 0, spinner);
  for (int round = 0; round < 6; ++round) {
    const auto results = session->bench(request({v}, false), {});
    ASSERT_EQ(results.size(), 1U);
    EXPECT_EQ(results[0].status, "ok") << "round " << round << ": " << results[0].error;
  }
  EXPECT_EQ(session->workers_started(), 1);
}

TEST_F(BenchSessionTest, ACpuVariantCannotReadHostFilesReachTheNetworkOrSignalTheDaemon) {
  // The worker's own answer: "landlock <ABI>", or why it has none.
  const auto sandbox = runner_.sandbox();
  const int abi = sandbox && sandbox->starts_with("landlock ") ? std::stoi(sandbox->substr(9)) : 0;
  if (abi < 6) {
    GTEST_SKIP() << "needs Landlock ABI 6 (TCP and signal scoping): "
                 << (sandbox ? *sandbox : sandbox.error());
  }
  // A port that listens, a file this test can read, and this process: each
  // escape the variant manages adds to its first output, making it wrong.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string secret = std::string(KCACHE_TEST_DATA_DIR) + "/kernels/tiled_matmul.cpp";
  std::string escaper = R"cpp(
extern "C" int open(const char*, int, ...);
extern "C" int socket(int, int, int);
extern "C" int connect(int, const void*, unsigned);
extern "C" int kill(int, int);
extern "C" int getppid();
struct Address { unsigned short family, port; unsigned addr; char zero[8]; };
extern "C" void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  float escaped = 0;
  if (open("SECRET", 0) >= 0) escaped += 1000;
  const Address a{2, PORT_BE, 0x0100007Fu, {}};
  const int s = socket(2, 1, 0);
  if (s >= 0 && connect(s, &a, sizeof a) == 0) escaped += 2000;
  if (kill(getppid(), 0) == 0) escaped += 4000;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0.f;
      for (int k = 0; k < K; ++k) sum += A[i * K + k] * B[k * N + j];
      C[i * N + j] = sum;
    }
  C[0] += escaped;
}
)cpp";
  escaper.replace(escaper.find("SECRET"), 6, secret);
  escaper.replace(escaper.find("PORT_BE"), 7, std::to_string(address.sin_port));
  const auto session = runner_.open_bench();
  const auto results = session->bench(request({variant(8, 0, 0, escaper)}), {});
  ::close(listener);
  ASSERT_EQ(results.size(), 1U);
  // max error 1000 read the file, 2000 connected, 4000 signalled (sums for several)
  EXPECT_EQ(results[0].status, "ok") << results[0].error;
}

// A CUDA round of `n` variants T=1..n whose binaries are no CUBINs: each
// fails to load, or finds no GPU (as in CI): an error answer each.
BenchRequest cuda_request_without_cubins(int n) {
  BenchRequest request;
  request.search_json = R"({"params": {"T": [1, 2, 3, 4, 5]}, "benchmark": {
      "args": [{"buffer": "y", "count": 4, "output": true}],
      "launch": {"grid": 1, "block": 32}, "reference": {"T": 1}}})";
  request.device = "cuda";
  request.entry = "f";
  request.reference = {"reference", {{"T", 1}}, "not a CUBIN"};
  for (int t = 1; t <= n; ++t) {
    request.variants.push_back({"T=" + std::to_string(t), {{"T", t}}, "not a CUBIN"});
  }
  return request;
}

TEST(BenchRunner, AGpuRoundIsDealtOverOneWorkerPerGpuAndComesBackInOrder) {
  // Two lanes (GPUs 0 and 1): five variants, dealt 0,2,4 and 1,3. Not CUBINs,
  // so each fails to load (or finds no GPU, as in CI): an answer each, in order.
  WorkerRunner runner(worker_binary(), limits());
  const auto session = runner.open_bench({0, 1});
  BenchRequest request = cuda_request_without_cubins(5);
  request.check = false;
  const auto results = session->bench(request, {});
  ASSERT_EQ(results.size(), 5U);
  for (std::size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].id, request.variants[i].id);
    EXPECT_EQ(results[i].status, "error") << results[i].id;
    EXPECT_FALSE(results[i].error.empty());
  }
  EXPECT_EQ(session->workers_started(), 2);
  // A one-variant GPU round uses one lane.
  request.variants.resize(1);
  const auto one = session->bench(request, {});
  ASSERT_EQ(one.size(), 1U);
  EXPECT_EQ(one[0].error, results[0].error);
  EXPECT_EQ(session->workers_started(), 2);
}

TEST(BenchRunner, FinalistsAreComparedOnOneGpu) {
  // A checked round of few variants (halving's finalists) stays on the first
  // GPU: a second worker is started only for the unchecked round after it.
  WorkerRunner runner(worker_binary(), limits());
  const auto session = runner.open_bench({0, 1});
  BenchRequest request = cuda_request_without_cubins(3);
  request.check = true;
  EXPECT_EQ(session->bench(request, {}).size(), 3U);
  EXPECT_EQ(session->workers_started(), 1);
  request.check = false;
  EXPECT_EQ(session->bench(request, {}).size(), 3U);
  EXPECT_EQ(session->workers_started(), 2);
}

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
