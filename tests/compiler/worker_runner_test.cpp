// kcache-worker under WorkerRunner: real compiles, and each way a compile can
// go wrong (compiler error, crash, endless compile, CPU-time limit, memory
// limit) fails only its own job, with a diagnostic.

#include <kcache/compiler/worker_runner.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace kcache::compiler {
namespace {

// scripts/test points this at a release kcache-worker: an ASan worker cannot
// run under RLIMIT_AS, so the memory-limit test needs an uninstrumented one.
std::string worker_binary() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env != nullptr && *env != '\0' ? env : KCACHE_WORKER_BINARY;
}

bool worker_is_instrumented() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env == nullptr || *env == '\0' ? KCACHE_SANITIZED != 0 : false;
}

WorkerLimits limits(std::chrono::milliseconds wall,
                    std::chrono::seconds cpu = std::chrono::seconds(60), std::uint64_t memory = 0) {
  return WorkerLimits{wall, cpu,
                      worker_is_instrumented() ? 0 : (memory == 0 ? 4ULL << 30 : memory)};
}

CompileSpec cpp(std::string source, std::vector<std::string> options = {"-O2", "-std=c++20"}) {
  CompileSpec s;
  s.backend = Backend::kCpp;
  s.source = {"job.cpp", std::move(source)};
  s.options = std::move(options);
  s.target = "x86-64-v2";
  s.output = OutputKind::kObject;
  return s;
}

TEST(WorkerRunner, CompilesInASubprocess) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(60)));
  auto out = runner.run(cpp("extern \"C\" int answer() { return 42; }"));
  ASSERT_TRUE(out.outcome.has_value()) << out.outcome.error().message << "\n"
                                       << out.outcome.error().log;
  EXPECT_EQ(out.outcome->binary.rfind("\x7f"
                                      "ELF",
                                      0),
            0U);
  EXPECT_EQ(out.toolchain.count("clang"), 1U);
}

TEST(WorkerRunner, CompileErrorsComeBackWithTheLog) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(60)));
  auto out = runner.run(cpp("int f() { return nope; }"));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kCompileFailed);
  EXPECT_NE(out.outcome.error().log.find("nope"), std::string::npos) << out.outcome.error().log;
  auto bad = runner.run(CompileSpec{}); // an empty spec: the worker says what is wrong
  ASSERT_FALSE(bad.outcome.has_value());
}

TEST(WorkerRunner, ACrashFailsOnlyItsJob) {
  WorkerRunner crashing(KCACHE_CRASHING_WORKER, limits(std::chrono::seconds(10)));
  auto out = crashing.run(cpp("int x;"));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_NE(out.outcome.error().message.find("crashed with signal"), std::string::npos)
      << out.outcome.error().message;
  EXPECT_NE(out.outcome.error().log.find("now faulting"), std::string::npos)
      << out.outcome.error().log;
  // And the next job on a healthy worker is unaffected.
  WorkerRunner healthy(worker_binary(), limits(std::chrono::seconds(60)));
  EXPECT_TRUE(healthy.run(cpp("int y;")).outcome.has_value());
}

// clang evaluating a constexpr loop of ~10^10 steps: a real compile that never ends.
constexpr const char* kEndlessConstexpr = R"(
constexpr long spin() { long s = 0; for (long i = 0; i < 10000000000L; ++i) s += i % 7; return s; }
constexpr long value = spin();
extern "C" long get() { return value; }
)";

TEST(WorkerRunner, AnEndlessCompileHitsTheWallClockLimit) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::milliseconds(1500)));
  const auto start = std::chrono::steady_clock::now();
  auto out = runner.run(cpp(kEndlessConstexpr, {"-std=c++20", "-fconstexpr-steps=2147483647"}));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_NE(out.outcome.error().message.find("wall-clock limit"), std::string::npos)
      << out.outcome.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(WorkerRunner, CpuTimeLimitKillsTheWorker) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(30), std::chrono::seconds(1)));
  auto out = runner.run(cpp(kEndlessConstexpr, {"-std=c++20", "-fconstexpr-steps=2147483647"}));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_NE(out.outcome.error().message.find("CPU-time limit"), std::string::npos)
      << out.outcome.error().message;
}

// clang materializing a 200M-element constexpr array: gigabytes of APValues.
constexpr const char* kMemoryHog = R"(
struct Big { int v[200000000]; };
constexpr Big make() { Big b{}; for (int i = 0; i < 200000000; ++i) b.v[i] = i; return b; }
constexpr Big big = make();
extern "C" int get(int i) { return big.v[i]; }
)";

TEST(WorkerRunner, AMemoryHungryCompileHitsTheMemoryLimit) {
  if (worker_is_instrumented()) {
    GTEST_SKIP() << "this kcache-worker is built with ASan, which RLIMIT_AS cannot bound; "
                    "scripts/test runs this against a release worker (KCACHE_WORKER_BINARY)";
  }
  WorkerRunner runner(worker_binary(),
                      WorkerLimits{std::chrono::seconds(60), std::chrono::seconds(60), 1ULL << 30});
  auto out = runner.run(cpp(kMemoryHog, {"-std=c++20", "-fconstexpr-steps=2147483647"}));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_NE(out.outcome.error().message.find("memory limit of 1024 MiB"), std::string::npos)
      << out.outcome.error().message;
}

// A worker that exits without reading its request: the runner's write fails
// (EPIPE) and the caller lives on; with a plain pipe this raised SIGPIPE,
// which kills a daemon that does not ignore it.
TEST(WorkerRunner, AWorkerThatNeverReadsItsRequestFailsCleanly) {
  WorkerRunner runner("/bin/true", limits(std::chrono::seconds(10)));
  auto out = runner.run(cpp(std::string(4 << 20, ' '))); // far more than a pipe buffer
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_NE(out.outcome.error().message.find("without a reply"), std::string::npos)
      << out.outcome.error().message;
}

TEST(WorkerRunner, MissingWorkerBinaryIsUnavailable) {
  WorkerRunner runner("/nonexistent/kcache-worker", limits(std::chrono::seconds(5)));
  auto out = runner.run(cpp("int x;"));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kUnavailable);
}

} // namespace
} // namespace kcache::compiler
