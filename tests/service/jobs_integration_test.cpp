// Compile jobs end to end: a real kcached with real kcache-worker processes,
// talked to through libkcache and the CLI. Slow compiles are real ones: clang
// evaluating a constexpr loop of SPIN steps (~1 s per million here).

#include "kcached_process.h"
#include "scrape_metric.h"
#include "test_data.h"

#include <kcache/client/client.h>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using client::CompileOutcome;
using client::CompileRequest;
using client::WaitPolicy;
using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

// scripts/test points KCACHE_WORKER_BINARY at a release worker; a sanitized
// one (the fallback) cannot run under an address-space limit.
std::vector<std::string> worker_args(std::vector<std::string> extra = {}) {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  std::vector<std::string> args = {"--worker-binary",
                                   release ? env : testing::built_binary("kcache-worker"),
                                   "--worker-memory", release ? "4GiB" : "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::unique_ptr<Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::milliseconds(5000);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

std::string cpp_spec(const std::string& source, std::vector<std::string> options = {"-O2"},
                     const std::string& output = "shared") {
  options.push_back("-std=c++20");
  return json{{"backend", "cpp"},
              {"source", {{"name", "kernel.cpp"}, {"text", source}}},
              {"options", options},
              {"target", "x86-64-v2"},
              {"output", output}}
      .dump();
}

// A compile that takes about `steps` / 1e6 seconds of clang's time.
std::string slow_spec(long steps, const std::string& tag = "") {
  return cpp_spec(R"(
constexpr long spin(long n) { long s = 0; for (long i = 0; i < n; ++i) s += i % 7; return s; }
constexpr long value = spin(SPIN);
extern "C" long get_value() { return value; } // )" +
                      tag,
                  {"-fconstexpr-steps=2147483647", "-DSPIN=" + std::to_string(steps)}, "object");
}

json job_json(const client::JobStatus& job) {
  return json::parse(job.json);
}

TEST(Jobs, CompilesAndTheSharedObjectRuns) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  CompileRequest request;
  request.key = "kc1-axpy";
  request.spec_json = cpp_spec(R"(
extern "C" void axpy(float a, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
})");
  auto first = c->get_or_compile(request);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_EQ(first->kind, CompileOutcome::Kind::kCompiled)
      << (first->job ? first->job->error_message + first->job->log : "") << kcached.log();
  ASSERT_TRUE(first->artifact.has_value());
  EXPECT_EQ(first->artifact->files.front().name, "kernel.so");

  // The bytes from the cache are a shared object that loads and computes.
  const std::string path = (kcached.dir().path() / "axpy.so").string();
  std::ofstream(path, std::ios::binary) << first->artifact->files.front().data;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  using Axpy = void (*)(float, const float*, float*, int);
  auto axpy = reinterpret_cast<Axpy>(::dlsym(handle, "axpy"));
  ASSERT_NE(axpy, nullptr);
  std::vector<float> x = {1, 2, 3, 4}, y = {10, 20, 30, 40};
  axpy(2.0F, x.data(), y.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{12, 24, 36, 48}));
  ::dlclose(handle);

  auto second = c->get_or_compile(request);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->kind, CompileOutcome::Kind::kHit);
  EXPECT_EQ(second->artifact->files.front().data, first->artifact->files.front().data);

  // The same spec under another key: linked from the compile key, not rebuilt.
  request.key = "kc1-axpy-again";
  auto third = c->get_or_compile(request);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->kind, CompileOutcome::Kind::kHit);
  EXPECT_EQ(testing::scrape_metric(*c, R"(kcache_compiles_total{result="succeeded"})"), 1);
}

TEST(Jobs, ThirtyTwoConcurrentSubmissionsCompileOnce) {
  KcachedProcess kcached(worker_args());
  const std::string spec = slow_spec(500'000);
  std::vector<std::thread> threads;
  std::atomic<int> compiled{0}, hits{0}, failed{0};
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] {
      auto c = connect(kcached.url());
      CompileRequest request;
      request.key = "kc1-shared-" + std::to_string(i % 4); // four client keys, one spec
      request.spec_json = spec;
      auto out = c->get_or_compile(request);
      if (!out || !out->artifact) {
        ++failed;
      } else {
        ++(out->kind == CompileOutcome::Kind::kCompiled ? compiled : hits);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(failed.load(), 0) << kcached.log();
  EXPECT_EQ(compiled.load() + hits.load(), 32);
  auto c = connect(kcached.url());
  EXPECT_EQ(testing::scrape_metric(*c, R"(kcache_compiles_total{result="succeeded"})"), 1)
      << "one compile for 32 submissions";
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(c->exists("kc1-shared-" + std::to_string(k)).value_or(false))
        << "every submitter's key gets the result";
  }
}

TEST(Jobs, FailuresCarryTheLogAndAreCachedForTheirTtl) {
  KcachedProcess kcached(worker_args({"--negative-ttl-s", "2"}));
  auto c = connect(kcached.url());
  CompileRequest request;
  request.key = "kc1-broken";
  request.spec_json = cpp_spec("int broken() { return missing_name; }");
  auto out = c->get_or_compile(request);
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(out->kind, CompileOutcome::Kind::kFailed);
  EXPECT_EQ(out->job->error_code, client::JobError::kCompileFailed);
  EXPECT_NE(out->job->log.find("missing_name"), std::string::npos) << out->job->log;

  auto again = c->submit(request.key, request.spec_json);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, "failed-recently") << "the negative cache answers";
  EXPECT_EQ(testing::scrape_metric(*c, R"(kcache_compiles_total{result="failed"})"), 1);

  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  auto later = c->submit(request.key, request.spec_json);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->status, "queued") << "after the TTL the compile is tried again";
}

// The key leaves out diagnostics, the negative cache does not: a failure under
// -Werror must not block the same source compiled without it.
TEST(Jobs, AWerrorFailureDoesNotBlockTheSpecWithoutIt) {
  KcachedProcess kcached(worker_args({"--negative-ttl-s", "60"}));
  auto c = connect(kcached.url());
  const std::string source = "extern \"C\" int f() { int unused = 1; return 0; }";
  CompileRequest strict;
  strict.key = "kc1-werror";
  strict.spec_json = cpp_spec(source, {"-O2", "-Wall", "-Werror"}, "object");
  auto failed = c->get_or_compile(strict);
  ASSERT_TRUE(failed.has_value());
  ASSERT_EQ(failed->kind, CompileOutcome::Kind::kFailed);
  EXPECT_NE(failed->job->log.find("unused"), std::string::npos) << failed->job->log;
  auto again = c->submit(strict.key, strict.spec_json);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, "failed-recently");

  CompileRequest lenient;
  lenient.key = "kc1-no-werror";
  lenient.spec_json = cpp_spec(source, {"-O2"}, "object");
  auto compiled = c->get_or_compile(lenient);
  ASSERT_TRUE(compiled.has_value());
  EXPECT_EQ(compiled->kind, CompileOutcome::Kind::kCompiled)
      << (compiled->job ? compiled->job->error_message : "");
}

// A compile killed by a resource limit says nothing about its source: it is
// reported as "resource-limit" and not negatively cached, so a resubmission
// compiles again. A source error still is cached.
TEST(Jobs, ResourceLimitFailuresAreNotNegativelyCached) {
  KcachedProcess kcached(
      worker_args({"--compile-timeout-s", "1", "--negative-ttl-s", "60", "--workers", "2"}));
  auto c = connect(kcached.url());
  const std::string endless = slow_spec(10'000'000'000L, "limit");
  auto first = c->submit("kc1-limit", endless);
  ASSERT_TRUE(first.has_value() && first->job.has_value());
  auto done = c->job(first->job->id, std::chrono::seconds(20));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, client::JobState::kFailed);
  EXPECT_EQ(done->error_code, client::JobError::kResourceLimit) << done->error_message;
  EXPECT_NE(done->error_message.find("wall-clock limit of 1000 ms"), std::string::npos)
      << done->error_message;
  EXPECT_EQ(job_json(*done)["error"]["code"], "resource-limit");

  auto again = c->submit("kc1-limit", endless);
  ASSERT_TRUE(again.has_value() && again->job.has_value());
  EXPECT_EQ(again->status, "queued") << "not answered from the negative cache";
  EXPECT_NE(again->job->id, first->job->id) << "a new job compiles it again";
  auto redone = c->job(again->job->id, std::chrono::seconds(20));
  ASSERT_TRUE(redone.has_value());
  EXPECT_EQ(redone->error_code, client::JobError::kResourceLimit);

  // The listing shows the code beside the message.
  std::string out;
  ASSERT_EQ(
      testing::run_command({testing::built_binary("kcache"), "--url", kcached.url(), "jobs"}, out),
      0);
  EXPECT_NE(out.find("resource-limit: the compile hit the wall-clock"), std::string::npos) << out;

  // A source error is cached, and its message names clang's first diagnostic.
  CompileRequest broken;
  broken.key = "kc1-broken-source";
  broken.spec_json = cpp_spec("extern \"C\" int broken() { return missing_name; }");
  auto failed = c->get_or_compile(broken);
  ASSERT_TRUE(failed.has_value());
  ASSERT_EQ(failed->kind, CompileOutcome::Kind::kFailed);
  EXPECT_EQ(failed->job->error_code, client::JobError::kCompileFailed);
  EXPECT_NE(failed->job->error_message.find("error: use of undeclared identifier 'missing_name'"),
            std::string::npos)
      << failed->job->error_message;
  auto cached = c->submit(broken.key, broken.spec_json);
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(cached->status, "failed-recently");
}

// What NVRTC did under the 8 GiB limit (crashing_worker mimics it): ptxas's
// "Memory allocation failure" on stderr, a plain compile error in the reply.
TEST(Jobs, AnAllocationFailureIsAResourceLimitNotASourceError) {
  KcachedProcess kcached({"--worker-binary", testing::built_binary("crashing_worker"),
                          "--worker-memory", "8GiB", "--force-worker-memory", "--negative-ttl-s",
                          "60"});
  auto c = connect(kcached.url());
  CompileRequest request;
  request.key = "kc1-ptxas-oom";
  request.spec_json = cpp_spec("// KCACHE_TEST_PTXAS_OOM");
  auto out = c->get_or_compile(request);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ASSERT_EQ(out->kind, CompileOutcome::Kind::kFailed);
  EXPECT_EQ(out->job->error_code, client::JobError::kResourceLimit);
  EXPECT_NE(out->job->error_message.find("memory limit of 8192 MiB"), std::string::npos)
      << out->job->error_message;
  EXPECT_NE(out->job->error_message.find("Memory allocation failure"), std::string::npos)
      << out->job->error_message;
  EXPECT_NE(out->job->log.find("Ptx assembly aborted due to errors"), std::string::npos)
      << out->job->log;
  EXPECT_EQ(out->job->log.find('\0'), std::string::npos) << "no stray NUL";
  auto again = c->submit(request.key, request.spec_json);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->status, "queued") << "not negatively cached";
}

TEST(Jobs, ATimeoutFailsOnlyItsJob) {
  KcachedProcess kcached(worker_args({"--compile-timeout-s", "1", "--workers", "2"}));
  auto c = connect(kcached.url());
  auto endless = c->submit("kc1-endless", slow_spec(10'000'000'000L));
  ASSERT_TRUE(endless.has_value());
  CompileRequest ok;
  ok.key = "kc1-fine";
  ok.spec_json = cpp_spec("extern \"C\" int fine() { return 1; }");
  auto fine = c->get_or_compile(ok);
  ASSERT_TRUE(fine.has_value());
  EXPECT_EQ(fine->kind, CompileOutcome::Kind::kCompiled) << "the other worker goes on";

  auto done = c->job(endless->job->id, std::chrono::seconds(10));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, client::JobState::kFailed);
  EXPECT_NE(done->error_message.find("wall-clock limit"), std::string::npos) << done->error_message;
  EXPECT_TRUE(c->exists("kc1-fine").value_or(false)) << "the daemon still serves";
}

TEST(Jobs, AMemoryLimitKillFailsOnlyItsJob) {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  if (env == nullptr || *env == '\0') {
    GTEST_SKIP()
        << "needs an uninstrumented kcache-worker (KCACHE_WORKER_BINARY; scripts/test sets "
           "it): a sanitized one cannot run under an address-space limit";
  }
  KcachedProcess kcached({"--worker-binary", env, "--worker-memory", "1GiB"});
  auto c = connect(kcached.url());
  CompileRequest hog;
  hog.key = "kc1-hog";
  hog.spec_json = cpp_spec(testing::test_data("kernels/memory_hog.cpp"),
                           {"-fconstexpr-steps=2147483647"}, "object");
  auto out = c->get_or_compile(hog);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ASSERT_EQ(out->kind, CompileOutcome::Kind::kFailed);
  EXPECT_NE(out->job->error_message.find("memory"), std::string::npos) << out->job->error_message;
  CompileRequest fine;
  fine.key = "kc1-after-hog";
  fine.spec_json = cpp_spec("extern \"C\" int fine() { return 2; }");
  auto next = c->get_or_compile(fine);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->kind, CompileOutcome::Kind::kCompiled) << "the next job is unaffected";
}

TEST(Jobs, AWorkerCrashFailsOnlyItsJob) {
  KcachedProcess kcached({"--worker-binary", testing::built_binary("crashing_worker")});
  auto c = connect(kcached.url());
  CompileRequest request;
  request.key = "kc1-crash";
  request.spec_json = cpp_spec("int x;");
  auto out = c->get_or_compile(request);
  ASSERT_TRUE(out.has_value()) << out.error().message;
  ASSERT_EQ(out->kind, CompileOutcome::Kind::kFailed);
  EXPECT_NE(out->job->error_message.find("crashed with signal"), std::string::npos)
      << out->job->error_message;
  EXPECT_NE(out->job->log.find("now faulting"), std::string::npos) << out->job->log;
  ASSERT_TRUE(c->put("kc1-still-here", {{"value", "v"}}).has_value()) << "the daemon serves on";
}

TEST(Jobs, JournaledJobsResumeAfterKill9) {
  KcachedProcess kcached(worker_args({"--workers", "1"}));
  auto c = connect(kcached.url());
  auto running = c->submit("kc1-resume-a", slow_spec(1'500'000, "a"));
  auto queued = c->submit("kc1-resume-b", slow_spec(200'000, "b"));
  ASSERT_TRUE(running.has_value() && queued.has_value());
  ASSERT_EQ(queued->status, "queued");
  // Kill while the first compiles (its worker dies with the daemon).
  for (auto deadline = Clock::now() + std::chrono::seconds(5); Clock::now() < deadline;) {
    if (c->job(running->job->id)->state == client::JobState::kRunning) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kcached.kill();
  kcached.start();
  c = connect(kcached.url());
  for (const auto& submitted : {running, queued}) {
    auto done = c->job(submitted->job->id, std::chrono::seconds(30));
    ASSERT_TRUE(done.has_value()) << done.error().message << kcached.log();
    EXPECT_EQ(done->state, client::JobState::kSucceeded) << done->json;
    EXPECT_TRUE(c->exists(done->keys.back()).value_or(false));
  }
  EXPECT_EQ(job_json(*c->job(running->job->id))["attempts"], 2)
      << "started again after the restart";
  EXPECT_NE(kcached.log().find("resumed"), std::string::npos);
}

TEST(Jobs, FullQueueIsBusyAndCancelWorks) {
  KcachedProcess kcached(worker_args({"--workers", "1", "--queue-capacity", "1"}));
  auto c = connect(kcached.url());
  auto a = c->submit("kc1-a", slow_spec(20'000'000, "a"));
  ASSERT_TRUE(a.has_value());
  for (auto deadline = Clock::now() + std::chrono::seconds(5); Clock::now() < deadline;) {
    if (c->job(a->job->id)->state == client::JobState::kRunning) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto b = c->submit("kc1-b", slow_spec(100, "b"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->status, "queued");
  auto busy = c->submit("kc1-c", slow_spec(100, "c"));
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->status, "busy");
  EXPECT_GT(busy->retry_after.count(), 0);

  auto cancelled_b = c->cancel(b->job->id);
  ASSERT_TRUE(cancelled_b.has_value());
  EXPECT_EQ(cancelled_b->state, client::JobState::kCancelled);
  const auto start = Clock::now();
  ASSERT_TRUE(c->cancel(a->job->id).has_value());
  auto a_done = c->job(a->job->id, std::chrono::seconds(5));
  ASSERT_TRUE(a_done.has_value());
  EXPECT_EQ(a_done->state, client::JobState::kCancelled);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "a running compile is killed";
  EXPECT_EQ(c->cancel("j-0000000000000000").error().http_status, 404);
}

TEST(Jobs, HigherPriorityRunsFirstAndLongPollsEndEarly) {
  KcachedProcess kcached(worker_args({"--workers", "1"}));
  auto c = connect(kcached.url());
  auto blocker = c->submit("kc1-blocker", slow_spec(800'000, "blocker"));
  auto low = c->submit("kc1-low", slow_spec(100, "low"), 0);
  auto high = c->submit("kc1-high", slow_spec(100, "high"), 10);
  ASSERT_TRUE(blocker && low && high);

  // A long-poll on a running job answers at its deadline with the state then.
  const auto poll_start = Clock::now();
  auto polled = c->job(low->job->id, std::chrono::milliseconds(300));
  ASSERT_TRUE(polled.has_value());
  EXPECT_FALSE(polled->finished());
  EXPECT_GE(Clock::now() - poll_start, std::chrono::milliseconds(250));

  // And it ends as soon as the job does, long before its deadline.
  auto low_done = c->job(low->job->id, std::chrono::seconds(60));
  ASSERT_TRUE(low_done.has_value());
  EXPECT_EQ(low_done->state, client::JobState::kSucceeded);
  auto high_done = c->job(high->job->id, std::chrono::seconds(60));
  EXPECT_LT(job_json(*high_done)["started_ms"].get<std::int64_t>(),
            job_json(*low_done)["started_ms"].get<std::int64_t>())
      << "priority 10 ran before priority 0, though submitted later";
}

TEST(Jobs, CliListsAndWatchesJobs) {
  KcachedProcess kcached(worker_args());
  auto c = connect(kcached.url());
  ASSERT_TRUE(c->submit("kc1-cli", slow_spec(300'000, "cli")).has_value());
  std::string out;
  const std::string kcache = testing::built_binary("kcache");
  EXPECT_EQ(testing::run_command({kcache, "--url", kcached.url(), "jobs", "watch"}, out), 0) << out;
  EXPECT_NE(out.find("1/1 done"), std::string::npos) << out;
  ASSERT_EQ(testing::run_command({kcache, "--url", kcached.url(), "jobs", "--json"}, out), 0);
  const json doc = json::parse(out);
  ASSERT_EQ(doc["jobs"].size(), 1U);
  EXPECT_EQ(doc["jobs"][0]["state"], "succeeded");
  ASSERT_EQ(testing::run_command({kcache, "--url", kcached.url(), "jobs"}, out), 0);
  EXPECT_NE(out.find("succeeded"), std::string::npos) << out;
  EXPECT_EQ(testing::run_command({kcache, "--url", kcached.url(), "job", "j-unknown"}, out), 1);
}

} // namespace
} // namespace kcache
