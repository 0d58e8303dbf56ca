// Issue 13, the job rows, against a real kcached: an autotune search of
// 20,000 variants is refused whole (the queue never passes its capacity), a
// 100 MB spec gets 413 on its head without holding memory, and a kcache-worker killed
// with SIGKILL mid-compile is retried (the job succeeds; nothing is
// negatively cached). Label `reliability`; each figure is printed.

#include "job_attacks.h"
#include "kcached_process.h"
#include "process_memory.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using client::HttpMethod;
using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace std::chrono_literals;

using testing::autotune_search;
using testing::cpp_spec;
using testing::kSanitized;
using testing::rss_mb;
using testing::spec_body;
using testing::worker_args;
using testing::workers_of;

// ASan's quarantine holds freed memory (256 MB by default): looser there.
constexpr double kRssSlackMb = kSanitized ? 400.0 : 100.0;

std::unique_ptr<Client> connect(const KcachedProcess& kcached) {
  client::ClientOptions o;
  o.url = kcached.url();
  o.timeout = std::chrono::milliseconds(30000);
  o.retries = 0;
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

struct Answer {
  int status = 0;
  json body;
  double seconds = 0;
};

Answer submit(Client& c, const std::string& body) {
  const auto start = Clock::now();
  auto res = c.request(HttpMethod::kPost, "/v1/jobs", body, "application/json");
  Answer a;
  a.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (res) {
    a.status = res->status;
    a.body = json::parse(res->body, nullptr, false);
  }
  return a;
}

std::size_t queued(Client& c) {
  auto res = c.request(HttpMethod::kGet, "/v1/jobs?limit=1");
  return res ? json::parse(res->body)["counts"]["queued"].get<std::size_t>() : 0;
}

TEST(ReliabilityJobs, AnAutotuneSearchOfTwentyThousandVariantsIsRefusedWhole) {
  std::vector<std::string> args = worker_args();
  args.insert(args.end(), {"--workers", "1"});
  KcachedProcess kcached(args);
  auto c = connect(kcached);
  const double rss_before = rss_mb(kcached.pid());

  const Answer huge = submit(*c, json{{"spec", autotune_search(200, 100)}}.dump());
  EXPECT_EQ(huge.status, 400) << huge.body.dump();
  const std::string error = huge.body.value("error", std::string());
  EXPECT_NE(error.find("queue_capacity 1024"), std::string::npos) << error;
  EXPECT_EQ(queued(*c), 0U) << "none of its variants queued";
  // Over one submitter's quota (256 by default) though within the queue.
  const Answer over_quota = submit(*c, json{{"spec", autotune_search(30, 10)}}.dump());
  EXPECT_EQ(over_quota.status, 400) << over_quota.body.dump();
  EXPECT_NE(over_quota.body.value("error", std::string()).find("max_jobs_per_submitter 256"),
            std::string::npos)
      << over_quota.body.dump();
  EXPECT_EQ(queued(*c), 0U);
  const double rss_after = rss_mb(kcached.pid());
  EXPECT_LT(rss_after - rss_before, kRssSlackMb) << rss_before << " -> " << rss_after << " MB";
  std::printf("[ figures ] autotune 20,000 variants: %d in %.2f s, queued 0 (capacity 1024); "
              "300 variants: %d; RSS %.0f -> %.0f MB\n",
              huge.status, huge.seconds, over_quota.status, rss_before, rss_after);
}

TEST(ReliabilityJobs, AHundredMegabyteSpecIs413AndMemoryStays) {
  // 4 MiB, not the default 16 MiB: parsing a spec just over the default
  // takes seconds under ASan. 100 MB is refused unparsed either way.
  std::vector<std::string> args = worker_args();
  args.insert(args.end(), {"--max-spec-bytes", "4MiB"});
  KcachedProcess kcached(args);
  auto c = connect(kcached);
  const double rss_before = rss_mb(kcached.pid());
  const std::string body = spec_body(100'000'000);
  double rss_peak = rss_before;
  double slowest = 0;
  for (int i = 0; i < 3; ++i) {
    const Answer a = submit(*c, body);
    EXPECT_EQ(a.status, 413) << a.body.dump();
    EXPECT_NE(a.body.value("error", std::string()).find("max_spec_bytes"), std::string::npos)
        << a.body.dump();
    slowest = std::max(slowest, a.seconds);
    rss_peak = std::max(rss_peak, rss_mb(kcached.pid()));
  }
  // Refused on its head (Content-Length): the body is never held.
  EXPECT_LT(rss_peak - rss_before, kSanitized ? 100.0 : 50.0)
      << rss_before << " -> " << rss_peak << " MB";
  // Within the JSON bound but over max_spec_bytes of source: refused once parsed.
  const Answer parsed = submit(*c, spec_body(5 << 20));
  EXPECT_EQ(parsed.status, 413) << parsed.body.dump();
  EXPECT_NE(parsed.body.value("error", std::string()).find("over max_spec_bytes (4194304 bytes)"),
            std::string::npos)
      << parsed.body.dump();
  std::this_thread::sleep_for(200ms);
  const double rss_after = rss_mb(kcached.pid());
  EXPECT_LT(rss_after - rss_before, kRssSlackMb) << rss_before << " -> " << rss_after << " MB";
  auto jobs = c->request(HttpMethod::kGet, "/v1/jobs");
  ASSERT_TRUE(jobs.has_value());
  EXPECT_EQ(json::parse(jobs->body)["jobs"].size(), 0U) << "nothing of them is kept";
  std::printf(
      "[ figures ] 100 MB spec x3: 413, slowest %.2f s; 5 MiB source: %d in %.2f s; RSS %.0f -> "
      "peak %.0f -> %.0f MB after\n",
      slowest, parsed.status, parsed.seconds, rss_before, rss_peak, rss_after);
}

TEST(ReliabilityJobs, AWorkerKilledMidCompileIsRetriedAndNothingIsNegativelyCached) {
  std::vector<std::string> args = worker_args();
  args.insert(args.end(), {"--workers", "1", "--compile-timeout-s", "60"});
  KcachedProcess kcached(args);
  auto c = connect(kcached);
  // Seconds of clang's constant evaluator, in little memory.
  const std::string slow = "constexpr long spin() { long s = 0; for (long i = 0; i < 1500000; "
                           "++i) s += i % 7; return s; }\nextern \"C\" long value() { constexpr "
                           "long v = spin(); return v; }\n";
  const std::string body =
      json{{"key", "kc1-killed"}, {"spec", cpp_spec(slow, {"-O2", "-fconstexpr-steps=2147483647"})}}
          .dump();
  const Answer queued_answer = submit(*c, body);
  ASSERT_EQ(queued_answer.status, 202) << queued_answer.body.dump();
  const std::string id = queued_answer.body["job"]["id"].get<std::string>();

  std::vector<pid_t> workers;
  for (const auto deadline = Clock::now() + 20s; workers.empty() && Clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
    workers = workers_of(kcached.pid());
  }
  ASSERT_FALSE(workers.empty()) << "no kcache-worker started";
  std::this_thread::sleep_for(200ms); // into the compile
  ASSERT_EQ(::kill(workers.front(), SIGKILL), 0);
  const auto killed_at = Clock::now();

  auto job = c->job(id, std::chrono::seconds(90));
  ASSERT_TRUE(job.has_value()) << job.error().message;
  const json done = json::parse(job->json);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  const std::string state = done.value("state", std::string());
  if (state == "succeeded") {
    EXPECT_GE(done.value("attempts", 0), 2) << done.dump();
  } else {
    // Killed on every attempt (a slow host): then an infrastructure failure.
    EXPECT_EQ(done["error"]["code"], "infrastructure") << done.dump();
    const Answer again = submit(*c, body);
    EXPECT_EQ(again.body.value("status", std::string()), "queued")
        << "not negatively cached: " << again.body.dump();
  }
  EXPECT_EQ(state, "succeeded") << done.dump();
  EXPECT_NE(kcached.log().find("retrying in 1000 ms"), std::string::npos);
  std::printf("[ figures ] kill -9 of the worker mid-compile: job %s after %d attempts, %.2f s "
              "after the kill\n",
              state.c_str(), done.value("attempts", 0), seconds);
}

} // namespace
} // namespace kcache
