// /metrics' gauges and labelled lookups, the access log, and age-based gc
// (issue 17 part 5), over a counted memory tier without sockets.

#include <kcache/protocol/units.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/access_log.h>
#include <kcache/service/age_evictor.h>
#include <kcache/service/lease_table_local.h>
#include <kcache/service/lookup_metrics.h>
#include <kcache/service/request_handler.h>
#include <kcache/storage/counting_store.h>
#include <kcache/storage/maintenance.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <thread>

namespace kcache::service {
namespace {

using nlohmann::json;

// An artifact upload's body: its record, then one file.
std::string parts(const std::string& file) {
  return protocol::wire::encode_parts({{"record", "{}"}, {"f", file}});
}

TEST(CacheKind, FollowsHowKcacheTorchAndTheServiceNameKeys) {
  EXPECT_EQ(cache_kind("torch:team-a:pt2:fx-graph-v1::fabc:c1"), CacheKind::kFxGraph);
  EXPECT_EQ(cache_kind("torch:team-a:pt2:autograd-experimental::abc:c1"), CacheKind::kAot);
  EXPECT_EQ(cache_kind("torch:team-a:pt2:autotune-best-config-v2::abc:c1"), CacheKind::kAutotune);
  EXPECT_EQ(cache_kind("torch:team-a:pt2:bundled-autotune-v1::abc:c1"), CacheKind::kAutotune);
  EXPECT_EQ(cache_kind("triton:team-a:abcdef:kernel.cubin"), CacheKind::kTriton);
  EXPECT_EQ(cache_kind("kcc-" + std::string(64, 'a')), CacheKind::kCompile);
  EXPECT_EQ(cache_kind("torch:team-a:run-manifest:x"), CacheKind::kOther);
  EXPECT_EQ(cache_kind("kc1-" + std::string(64, 'a')), CacheKind::kOther);
  EXPECT_EQ(cache_kind("plain"), CacheKind::kOther);
}

TEST(LookupMetrics, LabelsByNamespaceAndKindWithTheNamespacesCapped) {
  MetricsRegistry metrics;
  LookupMetrics lookups(metrics);
  lookups.record("torch:team-a:pt2:fx-graph-v1::k:c1", true);
  lookups.record("torch:team-a:pt2:fx-graph-v1::k:c1", true);
  lookups.record("triton:team-a:k:f", false);
  lookups.record("kcc-" + std::string(64, 'a'), true);
  const std::string text = metrics.render();
  EXPECT_NE(text.find(R"m(kcache_lookup_hits_total{namespace="team-a",kind="fx-graph"} 2)m"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"m(kcache_lookup_misses_total{namespace="team-a",kind="triton"} 1)m"),
            std::string::npos);
  EXPECT_NE(text.find(R"m(kcache_lookup_hits_total{namespace="(none)",kind="compile"} 1)m"),
            std::string::npos);
  for (std::size_t i = 0; i < LookupMetrics::kMaxNamespaces + 10; ++i) {
    lookups.record("torch:ns" + std::to_string(i) + ":pt2:fx-graph-v1::k:c1", false);
  }
  const std::string capped = metrics.render();
  std::size_t series = 0;
  for (std::size_t at = 0;
       (at = capped.find("kcache_lookup_misses_total{", at)) != std::string::npos; ++at) {
    ++series;
  }
  // team-a's triton row, 62 more namespaces (team-a and (none) took two of
  // the 64), then "(other)" for the rest.
  EXPECT_EQ(series, 1 + 62 + 1) << capped;
  EXPECT_NE(capped.find(R"m(kcache_lookup_misses_total{namespace="(other)",kind="fx-graph"} 12)m"),
            std::string::npos);
}

class HandlerObservability : public ::testing::Test {
protected:
  Response call(http::verb method, const std::string& target, std::string body = {}) {
    Request req{method, target, 11};
    req.body() = std::move(body);
    req.prepare_payload();
    return handler_.handle(req);
  }

  storage::CountingStore store_{std::make_unique<storage::MemoryStore>(1 << 20)};
  MetricsRegistry metrics_;
  RequestHandler handler_{store_, {{"memory", &store_}}, metrics_, {}};
};

TEST_F(HandlerObservability, ArtifactReadsAreCountedByNamespaceAndKind) {
  const std::string key = "torch:team-b:pt2:fx-graph-v1::fk:c1";
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/" + key, parts("v")).result(),
            http::status::created);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/" + key).result(), http::status::ok);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:team-b:pt2:fx-graph-v1::other:c1").result(),
            http::status::not_found);
  const std::string text = metrics_.render();
  EXPECT_NE(text.find(R"m(kcache_lookup_hits_total{namespace="team-b",kind="fx-graph"} 1)m"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"m(kcache_lookup_misses_total{namespace="team-b",kind="fx-graph"} 1)m"),
            std::string::npos);
}

TEST_F(HandlerObservability, AccessLogLinesNameRouteKeyStatusBytesAndTokenNotTheToken) {
  handler_.set_access_log(AccessLogMode::kText);
  const std::string key = "torch:team-c:" + std::string(100, 'k');
  ::testing::internal::CaptureStdout();
  call(http::verb::put, "/v1/artifacts/" + key, parts("12345"));
  call(http::verb::get, "/v1/nothing\n[info] forged");
  const std::string text = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(text.find("PUT /v1/artifacts/{key} key=torch:team-c:kkk"), std::string::npos) << text;
  EXPECT_NE(text.find("... 201 in=" + std::to_string(parts("12345").size()) + " out="),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("token=anonymous"), std::string::npos) << text;
  EXPECT_EQ(text.find(std::string(100, 'k')), std::string::npos) << "the key is shortened";
  EXPECT_NE(text.find("GET /v1/nothing?[info] forged 404"), std::string::npos) << text;

  handler_.set_access_log(AccessLogMode::kJson);
  ::testing::internal::CaptureStdout();
  call(http::verb::get, "/v1/artifacts/" + key);
  const std::string line = ::testing::internal::GetCapturedStdout();
  const json doc = json::parse(line);
  EXPECT_EQ(doc["method"], "GET");
  EXPECT_EQ(doc["route"], "/v1/artifacts/{key}");
  EXPECT_EQ(doc["status"], 200);
  EXPECT_GT(doc["bytes_out"].get<int>(), 5);
  EXPECT_EQ(doc["token"], "anonymous");
  EXPECT_TRUE(doc.contains("time"));
  EXPECT_TRUE(doc.contains("us"));

  handler_.set_access_log(AccessLogMode::kOff);
  ::testing::internal::CaptureStdout();
  call(http::verb::get, "/v1/artifacts/" + key);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

TEST(ProcessMetrics, UseThePrometheusNamesAndBuildInfoIsOne) {
  MetricsRegistry metrics;
  add_process_metrics(metrics);
  add_build_info(metrics);
  const std::string text = metrics.render();
  for (const char* name :
       {"process_resident_memory_bytes ", "process_open_fds ", "process_max_fds ",
        "process_cpu_seconds_total ", "process_start_time_seconds "}) {
    EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name << "\n" << text;
  }
  const auto start = text.find("\nprocess_start_time_seconds ");
  const double started = std::stod(text.substr(start + 28));
  const double now = static_cast<double>(storage::unix_now_ms()) / 1000;
  EXPECT_LT(started, now + 1);
  EXPECT_GT(started, now - 3600); // this test process began within the hour
  EXPECT_NE(text.find("kcache_build_info{version=\""), std::string::npos);
  EXPECT_NE(text.find("\",c_abi=\""), std::string::npos);
}

TEST(LeaseGauge, CountsLiveLocalLeases) {
  LocalLeaseTable leases;
  EXPECT_EQ(leases.held_count(), 0U);
  ASSERT_TRUE(leases.acquire("k1", "rank0", std::chrono::seconds(30)).granted);
  ASSERT_TRUE(leases.acquire("k2", "rank0", std::chrono::milliseconds(1)).granted);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(leases.held_count(), 1U); // k2's expired
}

TEST(AccessLogMode, ParsesItsThreeNames) {
  for (const auto mode : {AccessLogMode::kOff, AccessLogMode::kText, AccessLogMode::kJson}) {
    EXPECT_EQ(parse_access_log_mode(access_log_mode_name(mode)), mode);
  }
  EXPECT_FALSE(parse_access_log_mode("verbose").has_value());
}

TEST(Durations, TakeCcachesUnitsAndRefuseTheRest) {
  EXPECT_EQ(protocol::parse_duration_s("7d"), 7U * 86400);
  EXPECT_EQ(protocol::parse_duration_s("12h"), 12U * 3600);
  EXPECT_EQ(protocol::parse_duration_s("30m"), 1800U);
  EXPECT_EQ(protocol::parse_duration_s("90s"), 90U);
  EXPECT_EQ(protocol::parse_duration_s("45"), 45U);
  for (const char* bad : {"", "d", "7w", "-1d", "7 d", "1.5h", "99999999999d"}) {
    EXPECT_FALSE(protocol::parse_duration_s(bad).has_value()) << bad;
  }
}

TEST(AgeGc, RemovesWhatWasNotAccessedForThatLongAndKeepsTheRest) {
  storage::MemoryStore store(1 << 20);
  ASSERT_TRUE(store.put(storage::Area::kCas, "old", "aaaa"));
  ASSERT_TRUE(store.put(storage::Area::kAction, "fresh", "bb"));
  const std::int64_t now = storage::unix_now_ms();
  // A fake clock two hours ahead: both were last touched two hours ago, so
  // a three-hour cutoff keeps them...
  auto none = storage::collect_older_than(
      store, {.older_than = std::chrono::hours(3), .now_ms = now + std::int64_t{2} * 3'600'000});
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->removed_entries, 0U);
  // ...and a one-hour cutoff takes both.
  auto everything = storage::collect_older_than(
      store, {.older_than = std::chrono::hours(1), .now_ms = now + std::int64_t{2} * 3'600'000});
  ASSERT_TRUE(everything);
  EXPECT_EQ(everything->removed_entries, 2U);
  EXPECT_EQ(everything->removed_bytes, 6U);
  EXPECT_EQ(everything->after_bytes, 0U);
  EXPECT_FALSE(store.get(storage::Area::kCas, "old")->has_value());
}

TEST(AgeEvictor, RemovesEntriesNotReadForTheAgeOnItsOwn) {
  EXPECT_EQ(AgeEvictor::interval(std::chrono::hours(24 * 7)), std::chrono::hours(1));
  EXPECT_EQ(AgeEvictor::interval(std::chrono::seconds(1)), std::chrono::seconds(1));
  storage::MemoryStore store(1 << 20);
  ASSERT_TRUE(store.put(storage::Area::kCas, "k", "v"));
  AgeEvictor evictor(store, std::chrono::seconds(1));
  // Read every 100 ms (each read is an access), it stays...
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(store.get(storage::Area::kCas, "k")->has_value()) << "after " << i * 100 << " ms";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // ...and a second without reads ends it, within the next walks.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store.contains(storage::Area::kCas, "k").value_or(false) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(store.contains(storage::Area::kCas, "k").value_or(true));
}

TEST_F(HandlerObservability, GcRouteTakesAnAgeAndASizeAndRefusesNeither) {
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/torch:ns:a", parts("value")).result(),
            http::status::created);
  auto young = json::parse(call(http::verb::post, "/v1/admin/gc?older_than_s=3600").body());
  EXPECT_EQ(young["removed_entries"], 0) << young;
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:a").result(), http::status::ok);
  EXPECT_EQ(call(http::verb::post, "/v1/admin/gc").result(), http::status::bad_request);
  EXPECT_EQ(call(http::verb::post, "/v1/admin/gc?older_than_s=1h").result(),
            http::status::bad_request);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto old = json::parse(call(http::verb::post, "/v1/admin/gc?older_than_s=1&max_size=0").body());
  EXPECT_GE(old["removed_entries"].get<int>(), 2) << old; // the record and its blob
  EXPECT_EQ(old["after_bytes"], 0);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:a").result(), http::status::not_found);
}

} // namespace
} // namespace kcache::service
