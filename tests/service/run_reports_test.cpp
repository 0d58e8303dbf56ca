// kcache.torch's compile reports (/v1/runs, run_reports.h): stored and read
// back per namespace and run, bounded (a report's size, the count kept), and
// scoped (a token writes and reads only its namespaces).

#include "strong_token.h"
#include "temp_dir.h"

#include <kcache/service/request_handler.h>
#include <kcache/service/run_reports_local.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kcache::service {
namespace {

using nlohmann::json;
using testing::strong_token;

class RunRoutesTest : public ::testing::Test {
protected:
  RunRoutesTest()
      : handler_(store_, {{"memory", &store_}}, metrics_,
                 {make_token("a-writer", strong_token("a-writer"), {{"team-a", Role::kWrite}}),
                  make_token("b-reader", strong_token("b-reader"), {{"team-b", Role::kRead}})}) {
    handler_.set_runs(runs_.get());
  }

  Response call(http::verb method, const std::string& target, std::string body = {},
                const std::string& who = "a-writer") {
    Request req{method, target, 11};
    req.body() = std::move(body);
    req.set(http::field::authorization, "Bearer " + strong_token(who));
    req.prepare_payload();
    return handler_.handle(req);
  }

  static std::string report(int misses) {
    return json{{"host", "h1"},
                {"started_ms", 1000},
                {"totals", {{"compile_seconds", 2.5}, {"hits", 3}, {"misses", misses}}},
                {"misses", json::array({{{"graph", "g"}, {"explain", "x differs"}}})}}
        .dump();
  }

  storage::MemoryStore store_{1 << 20};
  MetricsRegistry metrics_;
  std::unique_ptr<RunReports> runs_ = *LocalRunReports::open("");
  RequestHandler handler_;
};

TEST_F(RunRoutesTest, StoresListsAndShowsAReport) {
  ASSERT_EQ(call(http::verb::put, "/v1/runs/team-a/run-1/rank0", report(1)).result(),
            http::status::ok);
  ASSERT_EQ(call(http::verb::put, "/v1/runs/team-a/run-1/rank1", report(2)).result(),
            http::status::ok);
  auto list = call(http::verb::get, "/v1/runs?namespace=team-a");
  ASSERT_EQ(list.result(), http::status::ok) << list.body();
  const json runs = json::parse(list.body()).at("runs");
  ASSERT_EQ(runs.size(), 1U) << list.body();
  EXPECT_EQ(runs[0]["run"], "run-1");
  EXPECT_EQ(runs[0]["ranks"], json::array({"rank0", "rank1"}));
  EXPECT_EQ(runs[0]["misses"], 3);
  EXPECT_EQ(runs[0]["hits"], 6);
  EXPECT_DOUBLE_EQ(runs[0]["compile_seconds"].get<double>(), 5.0);
  EXPECT_EQ(runs[0]["host"], "h1");

  auto shown = call(http::verb::get, "/v1/runs/team-a/run-1");
  ASSERT_EQ(shown.result(), http::status::ok) << shown.body();
  const json body = json::parse(shown.body());
  EXPECT_EQ(body["reports"]["rank1"]["misses"][0]["explain"], "x differs");
  EXPECT_EQ(call(http::verb::get, "/v1/runs/team-a/run-2").result(), http::status::not_found);
}

TEST_F(RunRoutesTest, RefusesBadOversizedAndMisaddressedReports) {
  EXPECT_EQ(call(http::verb::put, "/v1/runs/team-a/r/0", "{not json").result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::put, "/v1/runs/team-a/r/0", "[1, 2]").result(),
            http::status::bad_request);
  const std::string big = json{{"pad", std::string(runs_->limits().max_report_bytes, 'x')}}.dump();
  EXPECT_EQ(call(http::verb::put, "/v1/runs/team-a/r/0", big).result(),
            http::status::payload_too_large);
  for (const char* path : {"/v1/runs/team-a/r", "/v1/runs/team-a/r/0/x", "/v1/runs/team-a//0",
                           "/v1/runs/team-a/r%2F/0", "/v1/runs/team a/r/0"}) {
    EXPECT_EQ(call(http::verb::put, path, "{}").result(), http::status::bad_request) << path;
  }
  EXPECT_TRUE(json::parse(call(http::verb::get, "/v1/runs").body())["runs"].empty());
}

TEST_F(RunRoutesTest, TokensWriteAndReadOnlyTheirNamespaces) {
  // A write token of team-a cannot put a report in team-b.
  EXPECT_EQ(call(http::verb::put, "/v1/runs/team-b/r/0", report(1)).result(),
            http::status::forbidden);
  // A reader may not write at all.
  EXPECT_EQ(call(http::verb::put, "/v1/runs/team-b/r/0", report(1), "b-reader").result(),
            http::status::forbidden);
  ASSERT_EQ(call(http::verb::put, "/v1/runs/team-a/r/0", report(1)).result(), http::status::ok);
  // team-b's reader neither sees team-a's run listed nor reads it.
  EXPECT_TRUE(
      json::parse(call(http::verb::get, "/v1/runs", {}, "b-reader").body())["runs"].empty());
  EXPECT_TRUE(
      json::parse(call(http::verb::get, "/v1/runs?namespace=team-a", {}, "b-reader").body())["runs"]
          .empty());
  EXPECT_EQ(call(http::verb::get, "/v1/runs/team-a/r", {}, "b-reader").result(),
            http::status::not_found);
}

TEST_F(RunRoutesTest, ListingsAreBounded) {
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(call(http::verb::put, "/v1/runs/team-a/run-" + std::to_string(i) + "/0", report(0))
                  .result(),
              http::status::ok);
  }
  EXPECT_EQ(json::parse(call(http::verb::get, "/v1/runs?limit=5").body())["runs"].size(), 5U);
  EXPECT_EQ(json::parse(call(http::verb::get, "/v1/runs?limit=100000").body())["runs"].size(), 12U);
}

TEST(LocalRunReports, KeepsAtMostItsLimitsAndSurvivesAReopen) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "runs").string();
  RunReportLimits limits;
  limits.max_reports = 3;
  limits.max_age_ms = 10'000;
  const auto all = [](std::string_view) { return true; };
  {
    auto runs = *LocalRunReports::open(path, limits);
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(runs->put("ns", "run-" + std::to_string(i), "0", json::object(), 1000 + i));
    }
    const auto listed = *runs->list(all, std::nullopt, 100, 2000);
    ASSERT_EQ(listed.size(), 3U);
    EXPECT_EQ(listed.front().run, "run-4");               // newest first
    EXPECT_TRUE(runs->get("ns", "run-0", 2000)->empty()); // the oldest went first
  }
  auto reopened = *LocalRunReports::open(path, limits);
  EXPECT_EQ(reopened->list(all, std::nullopt, 100, 2000)->size(), 3U);
  EXPECT_EQ(reopened->get("ns", "run-4", 2000)->at("0"), "{}");
  // Past the age limit: no longer listed, and dropped at the next put.
  EXPECT_TRUE(reopened->list(all, std::nullopt, 100, 1000 + 20'000)->empty());
  ASSERT_TRUE(reopened->put("ns", "new", "0", json::object(), 1000 + 20'000));
  EXPECT_EQ(reopened->list(all, std::nullopt, 100, 1000 + 20'000)->size(), 1U);
}

} // namespace
} // namespace kcache::service
