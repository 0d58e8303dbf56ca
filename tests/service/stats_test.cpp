// GET /v1/stats and POST /v1/stats/zero over a counted memory tier, without
// sockets: hit ratio, bytes stored and capacity, version, and zeroing (admin
// only; /metrics keeps counting).

#include <kcache/protocol/admin.h>
#include <kcache/protocol/build_info.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/counting_store.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <strong_token.h>

namespace kcache::service {
namespace {

using nlohmann::json;

// An artifact upload's body: its record, then one file.
std::string upload_body(const std::string& file) {
  return protocol::wire::encode_parts({{"record", "{}"}, {"f", file}});
}

const std::string kAdmin = testing::strong_token("stats-admin");
const std::string kReader = testing::strong_token("stats-reader");

std::vector<Token> stats_tokens() {
  return {make_token("ops", kAdmin, {{"*", Role::kAdmin}}),
          make_token("trainer", kReader, {{"*", Role::kWrite}})};
}

class StatsTest : public ::testing::Test {
protected:
  Response call(http::verb method, const std::string& target, const std::string& token,
                std::string body = {}) {
    Request req{method, target, 11};
    req.body() = std::move(body);
    req.set(http::field::authorization, "Bearer " + token);
    req.prepare_payload();
    return handler_.handle(req);
  }

  protocol::Stats stats() {
    const Response r = call(http::verb::get, "/v1/stats", kReader);
    EXPECT_EQ(r.result(), http::status::ok) << r.body();
    auto parsed = protocol::stats_from_json(json::parse(r.body()));
    EXPECT_TRUE(parsed.has_value()) << parsed.error();
    return parsed.value_or(protocol::Stats{});
  }

  storage::CountingStore store_{std::make_unique<storage::MemoryStore>(1 << 20)};
  MetricsRegistry metrics_;
  RequestHandler handler_{store_, {{"memory", &store_}}, metrics_, stats_tokens()};
};

TEST_F(StatsTest, ShowsHitRatioSizesCapacityAndVersion) {
  EXPECT_FALSE(stats().hit_ratio.has_value()); // no lookups yet: no ratio, not 0
  ASSERT_EQ(
      call(http::verb::put, "/v1/artifacts/torch:ns:k1", kReader, upload_body("12345")).result(),
      http::status::created);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:k1", kReader).result(),
              http::status::ok);
  }
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:nothing", kReader).result(),
            http::status::not_found);
  const protocol::Stats s = stats();
  EXPECT_GT(s.hits, 0U);
  EXPECT_GT(s.misses, 0U);
  ASSERT_TRUE(s.hit_ratio.has_value());
  EXPECT_DOUBLE_EQ(*s.hit_ratio,
                   static_cast<double>(s.hits) / static_cast<double>(s.hits + s.misses));
  ASSERT_EQ(s.tiers.size(), 1U);
  EXPECT_EQ(s.tiers[0].capacity, 1U << 20);
  ASSERT_TRUE(s.tiers[0].bytes_stored.has_value());
  EXPECT_GE(*s.tiers[0].bytes_stored, 5U);
  EXPECT_GE(s.tiers[0].entries.value_or(0), 2U); // the record and its blob
  EXPECT_EQ(s.version, protocol::build_info().version);
  EXPECT_FALSE(s.version.empty());
  EXPECT_EQ(s.c_abi, protocol::build_info().c_abi);
  EXPECT_EQ(s.zeroed_ms, 0);
}

TEST_F(StatsTest, ZeroNeedsAdminEverywhereAndResetsOnlyWhatStatsShows) {
  ASSERT_EQ(
      call(http::verb::put, "/v1/artifacts/torch:ns:k1", kReader, upload_body("abc")).result(),
      http::status::created);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:k1", kReader).result(), http::status::ok);
  EXPECT_EQ(call(http::verb::post, "/v1/stats/zero", kReader).result(), http::status::forbidden);
  EXPECT_GT(stats().hits, 0U);

  const Response zeroed = call(http::verb::post, "/v1/stats/zero", kAdmin);
  ASSERT_EQ(zeroed.result(), http::status::ok) << zeroed.body();
  const protocol::Stats s = stats();
  EXPECT_EQ(s.hits, 0U);
  EXPECT_EQ(s.misses, 0U);
  EXPECT_FALSE(s.hit_ratio.has_value());
  EXPECT_EQ(s.tiers[0].hits, 0U);
  EXPECT_EQ(s.tiers[0].bytes_read, 0U);
  EXPECT_GT(s.zeroed_ms, 0);
  EXPECT_GE(s.tiers[0].entries.value_or(0), 2U); // what is stored stays

  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:ns:k1", kReader).result(), http::status::ok);
  EXPECT_GT(stats().hits, 0U);
  // Prometheus counters only go up: /metrics still counts from start-up.
  EXPECT_GT(store_.counters().hits, stats().hits);
}

} // namespace
} // namespace kcache::service
