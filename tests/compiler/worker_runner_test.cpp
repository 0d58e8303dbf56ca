// kcache-worker under WorkerRunner: real compiles, and each way a compile can
// go wrong (compiler error, crash, endless compile, CPU-time limit, memory
// limit) fails only its own job, with a diagnostic. Limits fail with
// kResourceLimit, never as if the source were wrong.

#include "test_data.h"
#include "test_worker.h"

#include <kcache/compiler/worker_runner.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace kcache::compiler {
namespace {

using testing::worker_binary;
using testing::worker_is_instrumented;

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
  EXPECT_EQ(out.exit, WorkerExit::kCompleted);
  EXPECT_EQ(out.outcome->binary.rfind("\x7f"
                                      "ELF",
                                      0),
            0U);
  // A compile reports no fingerprint (that walks the system include tree):
  // kcached records the one it keyed the compile with, from --toolchains.
  EXPECT_TRUE(out.toolchain.empty());
  auto toolchains = runner.toolchains();
  ASSERT_TRUE(toolchains.has_value()) << toolchains.error();
  const auto& cpp_toolchain = toolchains->at(Backend::kCpp).components();
  EXPECT_EQ(cpp_toolchain.count("clang"), 1U);
  EXPECT_EQ(cpp_toolchain.count("system-include"), 1U);
  EXPECT_NE(cpp_toolchain.at("targets").find("x86-64-v3"), std::string::npos);
  auto host = runner.host_target();
  ASSERT_TRUE(host.has_value()) << host.error();
  EXPECT_FALSE(host->cpu.empty());
}

bool has_nul(const std::string& s) {
  return s.find('\0') != std::string::npos;
}

TEST(WorkerRunner, CompileErrorsComeBackWithTheLog) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(60)));
  auto out = runner.run(cpp("int f() { return nope; }"));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kCompileFailed);
  EXPECT_EQ(out.exit, WorkerExit::kCompileError);
  EXPECT_NE(out.outcome.error().log.find("nope"), std::string::npos) << out.outcome.error().log;
  // The message names the first diagnostic, not just "clang could not compile".
  EXPECT_NE(
      out.outcome.error().message.find("job.cpp:1:18: error: use of undeclared identifier 'nope'"),
      std::string::npos)
      << out.outcome.error().message;
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
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kCompileFailed);
  EXPECT_EQ(out.exit, WorkerExit::kKilledBySignal);
  // And the next job on a healthy worker is unaffected.
  WorkerRunner healthy(worker_binary(), limits(std::chrono::seconds(60)));
  EXPECT_TRUE(healthy.run(cpp("extern \"C\" int y() { return 1; }")).outcome.has_value());
}

// What NVRTC did on the 8 GiB limit: ptxas said "Memory allocation failure"
// on stderr only, and the reply was a plain compile error whose log read
// "Ptx assembly aborted due to errors" and a NUL (crashing_worker mimics it).
TEST(WorkerRunner, AnAllocationFailureOnStderrIsAResourceLimit) {
  WorkerRunner runner(KCACHE_CRASHING_WORKER,
                      WorkerLimits{std::chrono::seconds(10), std::chrono::seconds(10), 8ULL << 30});
  auto out = runner.run(cpp("// KCACHE_TEST_PTXAS_OOM"));
  ASSERT_FALSE(out.outcome.has_value());
  const CompileError& e = out.outcome.error();
  EXPECT_EQ(e.code, CompileError::Code::kResourceLimit) << e.message;
  EXPECT_EQ(out.exit, WorkerExit::kMemoryLimit);
  EXPECT_NE(e.message.find("memory limit of 8192 MiB"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("peak RSS"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("elapsed"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("Memory allocation failure"), std::string::npos) << e.message;
  EXPECT_NE(e.log.find("Ptx assembly aborted due to errors"), std::string::npos) << e.log;
  EXPECT_NE(e.log.find("kcache-worker stderr:\nptxas fatal"), std::string::npos) << e.log;
  EXPECT_FALSE(has_nul(e.log));
  EXPECT_FALSE(has_nul(e.message));
}

TEST(WorkerRunner, AnEmptySourceHasNoEntryPoints) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(60)));
  for (const char* source : {"", "static int helper() { return 1; }", "int data[4];"}) {
    auto out = runner.run(cpp(source));
    ASSERT_FALSE(out.outcome.has_value()) << "'" << source << "' compiled to an artifact";
    EXPECT_EQ(out.outcome.error().code, CompileError::Code::kCompileFailed);
    EXPECT_NE(out.outcome.error().message.find("no entry points"), std::string::npos)
        << out.outcome.error().message;
  }
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
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kResourceLimit);
  EXPECT_EQ(out.exit, WorkerExit::kTimedOut);
  EXPECT_NE(out.outcome.error().message.find("wall-clock limit of 1500 ms"), std::string::npos)
      << out.outcome.error().message;
  EXPECT_NE(out.outcome.error().message.find("elapsed"), std::string::npos)
      << out.outcome.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(WorkerRunner, CpuTimeLimitKillsTheWorker) {
  WorkerRunner runner(worker_binary(), limits(std::chrono::seconds(30), std::chrono::seconds(1)));
  auto out = runner.run(cpp(kEndlessConstexpr, {"-std=c++20", "-fconstexpr-steps=2147483647"}));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kResourceLimit);
  EXPECT_EQ(out.exit, WorkerExit::kTimedOut);
  EXPECT_NE(out.outcome.error().message.find("CPU-time limit of 1 s"), std::string::npos)
      << out.outcome.error().message;
}

TEST(WorkerRunner, AMemoryHungryCompileHitsTheMemoryLimit) {
  if (worker_is_instrumented()) {
    GTEST_SKIP() << "this kcache-worker is built with ASan, which RLIMIT_AS cannot bound; "
                    "scripts/test runs this against a release worker (KCACHE_WORKER_BINARY)";
  }
  WorkerRunner runner(worker_binary(),
                      WorkerLimits{std::chrono::seconds(60), std::chrono::seconds(60), 1ULL << 30});
  auto out = runner.run(cpp(kcache::testing::test_data("kernels/memory_hog.cpp"),
                            {"-std=c++20", "-fconstexpr-steps=2147483647"}));
  ASSERT_FALSE(out.outcome.has_value());
  const CompileError& e = out.outcome.error();
  EXPECT_EQ(e.code, CompileError::Code::kResourceLimit) << e.message << "\n" << e.log;
  EXPECT_NE(e.message.find("memory limit of 1024 MiB"), std::string::npos) << e.message;
  EXPECT_EQ(out.exit, WorkerExit::kMemoryLimit);
  EXPECT_NE(e.message.find("peak RSS"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("elapsed"), std::string::npos) << e.message;
  EXPECT_FALSE(has_nul(e.log)) << "a stray NUL in the log";
  EXPECT_FALSE(has_nul(e.message));
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
  EXPECT_EQ(out.exit, WorkerExit::kProtocolError);
}

// The CUDA driver reserves more address space than RLIMIT_AS would allow a
// worker: a GPU bench runs without it, a CPU bench (and a compile) under it.
TEST(WorkerRunner, OnlyAGpuBenchRunsWithoutTheAddressSpaceLimit) {
  WorkerRunner runner(KCACHE_CRASHING_WORKER,
                      WorkerLimits{std::chrono::seconds(10), std::chrono::seconds(10), 1ULL << 30});
  BenchRequest request;
  request.variants = {BenchVariant{"v", {}, "binary"}};
  request.device = "cuda";
  auto gpu = runner.bench(request, {});
  ASSERT_EQ(gpu.size(), 1U);
  EXPECT_EQ(gpu[0].error, "RLIMIT_AS unlimited");
  request.device = "cpu";
  auto cpu = runner.bench(request, {});
  ASSERT_EQ(cpu.size(), 1U);
  EXPECT_EQ(cpu[0].error, "RLIMIT_AS " + std::to_string(1ULL << 30));
}

TEST(WorkerRunner, ABenchWorkerStoppingOnPurposeBlamesNoVariant) {
  // The worker answers one variant and exits 3 (its GPU context broke after
  // that variant): the rest go on in a fresh worker, with no error of its.
  WorkerRunner runner(KCACHE_CRASHING_WORKER,
                      WorkerLimits{std::chrono::seconds(10), std::chrono::seconds(10), 0});
  const auto session = runner.open_bench();
  BenchRequest request;
  request.search_json = R"({"kcache-test-exit3": 1})";
  request.device = "cuda";
  request.variants = {BenchVariant{"a", {}, "binary"}, BenchVariant{"b", {}, "binary"}};
  const auto results = session->bench(request, {});
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].id, "a");
  EXPECT_EQ(results[0].status, "ok") << results[0].error;
  EXPECT_EQ(results[1].id, "b");
  EXPECT_EQ(results[1].status, "ok") << results[1].error;
  EXPECT_EQ(session->workers_started(), 2);
}

TEST(WorkerRunner, MissingWorkerBinaryIsUnavailable) {
  WorkerRunner runner("/nonexistent/kcache-worker", limits(std::chrono::seconds(5)));
  auto out = runner.run(cpp("int x;"));
  ASSERT_FALSE(out.outcome.has_value());
  EXPECT_EQ(out.outcome.error().code, CompileError::Code::kUnavailable);
  EXPECT_EQ(out.exit, WorkerExit::kExecFailed);
}

} // namespace
} // namespace kcache::compiler
