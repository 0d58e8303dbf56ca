// The HTTP API as a function: every route, without sockets.

#include <kcache/cachekey/sha256.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/request_handler.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <strong_token.h>

#include <cstdio>
#include <thread>

namespace kcache::service {
namespace {

using nlohmann::json;
namespace wire = protocol::wire;

class HandlerTest : public ::testing::Test {
protected:
  explicit HandlerTest(std::vector<Token> tokens = {})
      : handler_(store_, {{"memory", &store_}}, metrics_, std::move(tokens)) {}

  Response call(http::verb method, std::string target, std::string body = {},
                std::string token = {}) {
    Request req{method, target, 11};
    req.body() = std::move(body);
    if (!token.empty()) {
      req.set(http::field::authorization, "Bearer " + token);
    }
    req.prepare_payload();
    return handler_.handle(req);
  }

  static std::string digest_of(const std::string& s) {
    return cachekey::to_hex(cachekey::Sha256::of(s));
  }

  storage::MemoryStore store_{64 << 20};
  MetricsRegistry metrics_;
  RequestHandler handler_;
};

TEST_F(HandlerTest, JobRoutesSayWhenThereAreNoWorkers) {
  auto r = call(http::verb::post, "/v1/jobs", "{}");
  EXPECT_EQ(r.result(), http::status::service_unavailable);
  EXPECT_NE(r.body().find("no compile workers"), std::string::npos) << r.body();
  EXPECT_EQ(call(http::verb::get, "/v1/jobs/j-1?wait_ms=100").result(),
            http::status::service_unavailable);
}

TEST_F(HandlerTest, HealthAndUnknownRoutes) {
  EXPECT_EQ(call(http::verb::get, "/healthz").result(), http::status::ok);
  auto r = call(http::verb::get, "/v2/nothing");
  EXPECT_EQ(r.result(), http::status::not_found);
  EXPECT_NE(r.body().find("no route"), std::string::npos);
  auto m = call(http::verb::post, "/v1/stats");
  EXPECT_EQ(m.result(), http::status::method_not_allowed);
  EXPECT_EQ(m[http::field::allow], "GET");
}

// Each path's 405 lists the methods the route table declares for it.
TEST_F(HandlerTest, WrongMethodsGet405WithThePathsMethods) {
  const std::vector<std::pair<std::string, std::string>> allowed = {
      {"/healthz", "GET, HEAD"},
      {"/metrics", "GET"},
      {"/v1/ac/k", "GET, HEAD, PUT, DELETE"},
      {"/v1/cas/" + std::string(64, 'a'), "GET, HEAD, PUT, DELETE"},
      {"/v1/artifacts/k", "GET, PUT"},
      {"/v1/batch/get", "POST"},
      {"/v1/entries", "GET"},
      {"/v1/entries/k", "GET"},
      {"/v1/admin/verify", "POST"},
      {"/v1/admin/gc", "POST"},
      {"/v1/jobs", "GET, POST"},
      {"/v1/jobs/j-1", "GET, DELETE"},
      {"/v1/leases/k", "POST, PUT, DELETE"}};
  for (const auto& [path, allow] : allowed) {
    auto r = call(http::verb::patch, path);
    EXPECT_EQ(r.result(), http::status::method_not_allowed) << path;
    EXPECT_EQ(r[http::field::allow], allow) << path;
    EXPECT_NE(r.body().find("PATCH is not allowed here"), std::string::npos) << r.body();
  }
  const std::string text = call(http::verb::get, "/metrics").body();
  EXPECT_NE(text.find(R"(kcache_http_requests_total{route="job",method="PATCH",code="405"} 1)"),
            std::string::npos)
      << text;
}

// Found by http_request_fuzzer: error messages echo client bytes, which need
// not be UTF-8; serializing them must not throw.
TEST_F(HandlerTest, NonUtf8BytesNeverBreakAResponse) {
  auto r = call(http::verb::get, "/v1/entr\xe9\xff");
  EXPECT_EQ(r.result(), http::status::not_found);
  EXPECT_NE(r.body().find("no route"), std::string::npos);
  const std::vector<wire::Part> upload = {{"record", "{}"}, {"bin\xff\xfe.o", "x"}};
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/bin", wire::encode_parts(upload)).result(),
            http::status::created);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/bin").result(), http::status::ok);
}

TEST_F(HandlerTest, CasPutChecksTheDigest) {
  const std::string blob = "kernel bytes";
  EXPECT_EQ(call(http::verb::put, "/v1/cas/" + std::string(64, 'a'), blob).result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::put, "/v1/cas/not-hex", blob).result(), http::status::bad_request);
  EXPECT_EQ(call(http::verb::put, "/v1/cas/" + digest_of(blob), blob).result(),
            http::status::created);
  auto got = call(http::verb::get, "/v1/cas/" + digest_of(blob));
  EXPECT_EQ(got.result(), http::status::ok);
  EXPECT_EQ(got.body(), blob);
  EXPECT_EQ(call(http::verb::head, "/v1/cas/" + digest_of(blob)).result(), http::status::ok);
  EXPECT_EQ(call(http::verb::head, "/v1/cas/" + digest_of("x")).result(), http::status::not_found);
  EXPECT_EQ(call(http::verb::delete_, "/v1/cas/" + digest_of(blob)).result(), http::status::ok);
  EXPECT_EQ(call(http::verb::get, "/v1/cas/" + digest_of(blob)).result(), http::status::not_found);
}

TEST_F(HandlerTest, ActionRecordsMayOnlyNamePresentBlobs) {
  const std::string blob = "cubin";
  const json record{{"key", "k1"},
                    {"outputs", {{{"name", "k.cubin"}, {"digest", digest_of(blob)}, {"size", 5}}}}};
  auto conflict = call(http::verb::put, "/v1/ac/k1", record.dump());
  EXPECT_EQ(conflict.result(), http::status::conflict);
  EXPECT_EQ(json::parse(conflict.body())["missing"][0], digest_of(blob));
  ASSERT_EQ(call(http::verb::put, "/v1/cas/" + digest_of(blob), blob).result(),
            http::status::created);
  EXPECT_EQ(call(http::verb::put, "/v1/ac/k1", record.dump()).result(), http::status::created);
  auto got = call(http::verb::get, "/v1/ac/k1");
  ASSERT_EQ(got.result(), http::status::ok);
  EXPECT_EQ(json::parse(got.body())["outputs"][0]["digest"], digest_of(blob));
  EXPECT_EQ(call(http::verb::put, "/v1/ac/other", record.dump()).result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::put, "/v1/ac/k1", "{not json").result(), http::status::bad_request);
  EXPECT_EQ(call(http::verb::get, "/v1/ac/bad%20key").result(), http::status::bad_request);
}

TEST_F(HandlerTest, ArtifactsRoundTripInOneRequest) {
  const std::vector<wire::Part> upload = {
      {"record", R"({"producer":"test","metadata":{"ms":"12"}})"},
      {"a.cubin", "AAA"},
      {"log", "ok"}};
  EXPECT_EQ(call(http::verb::put, "/v1/artifacts/art1", wire::encode_parts(upload)).result(),
            http::status::created);
  auto got = call(http::verb::get, "/v1/artifacts/art1");
  ASSERT_EQ(got.result(), http::status::ok);
  EXPECT_EQ(got[http::field::content_type], wire::kPartsContentType);
  auto parts = wire::decode_parts(got.body());
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 3U);
  EXPECT_EQ(json::parse((*parts)[0].data)["metadata"]["ms"], "12");
  EXPECT_EQ((*parts)[1], (wire::Part{"a.cubin", "AAA"}));
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/missing").result(), http::status::not_found);
  EXPECT_EQ(call(http::verb::put, "/v1/artifacts/x", "garbage").result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::put, "/v1/artifacts/x", wire::encode_parts({{"a", "b"}})).result(),
            http::status::bad_request); // no record part first
  const std::vector<wire::Part> bad_manifest = {{"record", R"({"manifest":{"schema_version":1}})"}};
  EXPECT_EQ(call(http::verb::put, "/v1/artifacts/x", wire::encode_parts(bad_manifest)).result(),
            http::status::bad_request);
  // The record part is read as libkcache's C ABI reads it (protocol/record_head.h).
  const auto bad_producer = call(http::verb::put, "/v1/artifacts/x",
                                 wire::encode_parts({{"record", R"({"producer":5})"}}));
  EXPECT_EQ(bad_producer.result(), http::status::bad_request);
  EXPECT_EQ(json::parse(bad_producer.body())["error"],
            "the record part: \"producer\" must be a string");
}

TEST_F(HandlerTest, BatchGetAnswersEveryKeyInOrder) {
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/b1",
                 wire::encode_parts({{"record", "{}"}, {"value", "one"}}))
                .result(),
            http::status::created);
  auto res = call(http::verb::post, "/v1/batch/get", R"({"keys":["b1","nope","b1"]})");
  ASSERT_EQ(res.result(), http::status::ok);
  auto parts = wire::decode_parts(res.body());
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 3U);
  EXPECT_EQ((*parts)[0].name, "b1");
  EXPECT_FALSE((*parts)[0].data.empty());
  EXPECT_TRUE((*parts)[1].data.empty());
  EXPECT_EQ(call(http::verb::post, "/v1/batch/get", R"({"keys":[1]})").result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::post, "/v1/batch/get", "[]").result(), http::status::bad_request);
  json many{{"keys", std::vector<std::string>(RequestHandler::kMaxBatchKeys + 1, "k")}};
  EXPECT_EQ(call(http::verb::post, "/v1/batch/get", many.dump()).result(),
            http::status::payload_too_large);
}

TEST_F(HandlerTest, EntriesListSortAndShow) {
  for (const char* k : {"e1", "e2"}) {
    ASSERT_EQ(call(http::verb::put, std::string("/v1/artifacts/") + k,
                   wire::encode_parts({{"record", "{}"}, {"v", std::string(k)}}))
                  .result(),
              http::status::created);
  }
  // e1 is read most, e2 most recently: each sort must pick its own first.
  (void)call(http::verb::get, "/v1/artifacts/e1");
  (void)call(http::verb::get, "/v1/artifacts/e1");
  std::this_thread::sleep_for(std::chrono::milliseconds(5)); // access times are in ms
  (void)call(http::verb::get, "/v1/artifacts/e2");
  auto listed = json::parse(call(http::verb::get, "/v1/entries?area=ac&sort=hits").body());
  ASSERT_EQ(listed["total"], 2);
  EXPECT_EQ(listed["entries"][0]["key"], "e1");
  EXPECT_EQ(listed["entries"][0]["hits"], 2);
  EXPECT_EQ(listed["entries"][1]["key"], "e2");
  auto recent = json::parse(call(http::verb::get, "/v1/entries?area=ac&sort=last_access").body());
  EXPECT_EQ(recent["entries"][0]["key"], "e2");
  EXPECT_EQ(recent["entries"][0]["hits"], 1);
  auto limited = json::parse(call(http::verb::get, "/v1/entries?limit=1&prefix=e").body());
  EXPECT_EQ(limited["entries"].size(), 1U);
  EXPECT_EQ(call(http::verb::get, "/v1/entries?sort=color").result(), http::status::bad_request);
  EXPECT_EQ(call(http::verb::get, "/v1/entries?area=zz").result(), http::status::bad_request);
  EXPECT_EQ(call(http::verb::get, "/v1/entries?limit=-1").result(), http::status::bad_request);
  auto shown = call(http::verb::get, "/v1/entries/e1");
  ASSERT_EQ(shown.result(), http::status::ok);
  EXPECT_EQ(json::parse(shown.body())["storage"]["key"], "e1");
}

TEST_F(HandlerTest, VerifyFindsAndRepairsBrokenEntries) {
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/v1",
                 wire::encode_parts({{"record", "{}"}, {"f", "good"}}))
                .result(),
            http::status::created);
  // A blob whose bytes no longer match its name, and a record whose blob is gone.
  ASSERT_TRUE(store_.put(storage::Area::kCas, digest_of("good"), "evil").has_value());
  auto report = json::parse(call(http::verb::post, "/v1/admin/verify?area=cas").body());
  EXPECT_EQ(report["checked"], 1);
  ASSERT_EQ(report["problems"].size(), 1U);
  EXPECT_EQ(report["repaired"], 0);
  report = json::parse(call(http::verb::post, "/v1/admin/verify?area=cas&repair=1").body());
  EXPECT_EQ(report["repaired"], 1);
  report = json::parse(call(http::verb::post, "/v1/admin/verify?area=ac&repair=1").body());
  ASSERT_EQ(report["problems"].size(), 1U);
  EXPECT_NE(report["problems"][0]["problem"].get<std::string>().find("missing"), std::string::npos);
  EXPECT_EQ(call(http::verb::get, "/v1/ac/v1").result(), http::status::not_found);
  EXPECT_EQ(call(http::verb::post, "/v1/admin/verify").result(), http::status::bad_request);
}

TEST_F(HandlerTest, GcDropsLeastRecentlyUsed) {
  for (int i = 0; i < 5; ++i) {
    const std::string blob(1000, static_cast<char>('a' + i));
    ASSERT_EQ(call(http::verb::put, "/v1/cas/" + digest_of(blob), blob).result(),
              http::status::created);
  }
  auto report = json::parse(call(http::verb::post, "/v1/admin/gc?max_size=2500").body());
  EXPECT_EQ(report["before_bytes"], 5000);
  EXPECT_LE(report["after_bytes"].get<int>(), 2500);
  EXPECT_EQ(report["removed_entries"], 3);
  EXPECT_EQ(call(http::verb::post, "/v1/admin/gc").result(), http::status::bad_request);
}

TEST_F(HandlerTest, MetricsCountRequestsAndStoreActivity) {
  (void)call(http::verb::get, "/healthz");
  (void)call(http::verb::get, "/v1/cas/" + digest_of("missing"));
  const std::string text = call(http::verb::get, "/metrics").body();
  EXPECT_NE(text.find(R"(kcache_http_requests_total{route="cas",method="GET",code="404"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("kcache_http_request_duration_seconds_bucket{route=\"healthz\",le=\"+Inf\"} 1"),
      std::string::npos);
  EXPECT_NE(text.find("# TYPE kcache_http_request_duration_seconds histogram"), std::string::npos);
}

// Strong tokens (kcached refuses weak ones), one per role.
const std::string kReadToken = kcache::testing::strong_token("reader");
const std::string kSubmitToken = kcache::testing::strong_token("submitter");
const std::string kWriteToken = kcache::testing::strong_token("writer");
const std::string kAdminToken = kcache::testing::strong_token("admin");

class AuthTest : public HandlerTest {
protected:
  AuthTest()
      : HandlerTest({make_token("r", kReadToken, {{"*", Role::kRead}}),
                     make_token("s", kSubmitToken, {{"*", Role::kSubmit}}),
                     make_token("w", kWriteToken, {{"*", Role::kWrite}}),
                     make_token("a", kAdminToken, {{"*", Role::kAdmin}})}) {}
};

TEST_F(AuthTest, RolesGateMethods) {
  const std::string blob = "b";
  const std::string target = "/v1/cas/" + digest_of(blob);
  EXPECT_EQ(call(http::verb::get, "/healthz").result(), http::status::ok); // open
  EXPECT_EQ(call(http::verb::get, target).result(), http::status::unauthorized);
  EXPECT_EQ(call(http::verb::get, target, "", "wrong").result(), http::status::unauthorized);
  EXPECT_EQ(call(http::verb::get, target, "", kReadToken).result(), http::status::not_found);
  EXPECT_EQ(call(http::verb::put, target, blob, kReadToken).result(), http::status::forbidden);
  EXPECT_EQ(call(http::verb::put, target, blob, kWriteToken).result(), http::status::created);
  EXPECT_EQ(call(http::verb::delete_, target, "", kWriteToken).result(), http::status::forbidden);
  EXPECT_EQ(call(http::verb::post, "/v1/admin/gc?max_size=0", "", kWriteToken).result(),
            http::status::forbidden);
  EXPECT_EQ(call(http::verb::delete_, target, "", kAdminToken).result(), http::status::ok);
}

TEST_F(AuthTest, RefusalsNameTheRoleARouteNeeds) {
  auto r = call(http::verb::post, "/v1/admin/gc?max_size=0", "", kWriteToken);
  EXPECT_EQ(r.result(), http::status::forbidden);
  EXPECT_EQ(json::parse(r.body())["error"],
            "this token's role may not POST /v1/admin/gc (it needs the admin role)");
  // Unknown tokens are refused before anything is said about the path.
  EXPECT_EQ(call(http::verb::get, "/v2/nothing").result(), http::status::unauthorized);
  EXPECT_EQ(call(http::verb::get, "/v2/nothing", "", kReadToken).result(), http::status::not_found);
  EXPECT_EQ(call(http::verb::head, "/healthz").result(), http::status::ok);
}

// A batch get only reads: a read-only trainer prefetches with it (issue 13).
TEST_F(AuthTest, BatchGetIsARead) {
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/pre",
                 protocol::wire::encode_parts({{"record", "{}"}, {"f", "x"}}), kWriteToken)
                .result(),
            http::status::created);
  const auto res =
      call(http::verb::post, "/v1/batch/get", R"({"keys": ["pre", "absent"]})", kReadToken);
  EXPECT_EQ(res.result(), http::status::ok);
  auto parts = protocol::wire::decode_parts(res.body());
  ASSERT_TRUE(parts.has_value()) << parts.error();
  EXPECT_FALSE(parts->empty());
  // Any token at all is still needed.
  EXPECT_EQ(call(http::verb::post, "/v1/batch/get", R"({"keys": []})", "").result(),
            http::status::unauthorized);
}

// Tokens scoped to namespaces (issue 14): an upload under another
// namespace's key is refused on its head, before its body is read; reads of
// it answer as misses.
class ScopedAuthTest : public HandlerTest {
protected:
  ScopedAuthTest()
      : HandlerTest({make_token("team-a", kWriteToken, {{"team-a*", Role::kWrite}}),
                     make_token("admin", kAdminToken, {{"*", Role::kAdmin}})}) {}
  std::optional<Response> admit_put(const std::string& key) {
    Request head{http::verb::put, "/v1/artifacts/" + key, 11};
    head.set(http::field::authorization, "Bearer " + kWriteToken);
    head.set(http::field::content_length, "1000000");
    return handler_.admit(head);
  }
};

TEST_F(ScopedAuthTest, UploadsToAnotherNamespaceAreRefusedOnTheirHead) {
  const auto refused = admit_put("torch:team-b:x");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->result(), http::status::forbidden);
  EXPECT_NE(refused->body().find("team-b"), std::string::npos) << refused->body();
  EXPECT_FALSE(admit_put("torch:team-a:x").has_value());
  const auto kcc = admit_put("kcc-" + std::string(64, 'a'));
  ASSERT_TRUE(kcc.has_value());
  EXPECT_EQ(kcc->result(), http::status::forbidden);
  // A kc1- key's namespace is in the body's manifest: admitted, judged later.
  EXPECT_FALSE(admit_put("kc1-" + std::string(64, 'a')).has_value());
  // team-b's entry reads as a miss for team-a.
  const std::string parts = wire::encode_parts({{"record", "{}"}, {"f", "x"}});
  ASSERT_EQ(call(http::verb::put, "/v1/artifacts/torch:team-b:e", parts, kAdminToken).result(),
            http::status::created);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:team-b:e", "", kWriteToken).result(),
            http::status::not_found);
  EXPECT_EQ(call(http::verb::head, "/v1/ac/torch:team-b:e", "", kWriteToken).result(),
            http::status::not_found);
  EXPECT_EQ(call(http::verb::get, "/v1/artifacts/torch:team-b:e", "", kAdminToken).result(),
            http::status::ok);
}

// Bodies nested deeper than protocol::kMaxJsonDepth are a 400, not a stack
// overflow (issue 13: 100,000 '[' killed kcached).
TEST_F(HandlerTest, DeeplyNestedJsonBodiesAreRefused) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_EQ(call(http::verb::post, "/v1/batch/get", R"({"keys":)" + deep + "}").result(),
            http::status::bad_request);
  EXPECT_EQ(call(http::verb::post, "/v1/jobs", R"({"spec":)" + deep + "}").result(),
            http::status::service_unavailable); // no job manager here: the 400 is kcached's test
  EXPECT_EQ(call(http::verb::put, "/v1/artifacts/deep",
                 protocol::wire::encode_parts({{"record", R"({"metadata":)" + deep + "}"}}))
                .result(),
            http::status::bad_request);
}

// Leases are for producers: the write role takes and releases them.
TEST_F(AuthTest, LeasesNeedTheWriteRole) {
  EXPECT_EQ(call(http::verb::post, "/v1/leases/k?ttl_ms=1000", "", kReadToken).result(),
            http::status::forbidden);
  EXPECT_EQ(call(http::verb::delete_, "/v1/leases/k?token=t", "", kSubmitToken).result(),
            http::status::forbidden);
  // This handler has no lease table: past the role check, the routes say so.
  EXPECT_EQ(call(http::verb::post, "/v1/leases/k?ttl_ms=1000", "", kWriteToken).result(),
            http::status::not_found);
  EXPECT_EQ(call(http::verb::get, "/v1/leases/k", "", kWriteToken).result(),
            http::status::method_not_allowed);
}

// Submitting and cancelling jobs is the submit role's; it may not write the
// action cache. (This handler has no job manager: past the role check, 503.)
TEST_F(AuthTest, TheSubmitRoleSubmitsJobsButWritesNothing) {
  const std::string spec =
      R"({"spec": {"backend": "cpp", "source": {"name": "a.cpp", "text": ""}}})";
  EXPECT_EQ(call(http::verb::post, "/v1/jobs", spec, kReadToken).result(), http::status::forbidden);
  EXPECT_EQ(call(http::verb::delete_, "/v1/jobs/j-1", "", kReadToken).result(),
            http::status::forbidden);
  EXPECT_EQ(call(http::verb::post, "/v1/jobs", spec, kSubmitToken).result(),
            http::status::service_unavailable);
  EXPECT_EQ(call(http::verb::delete_, "/v1/jobs/j-1", "", kSubmitToken).result(),
            http::status::service_unavailable);
  EXPECT_EQ(call(http::verb::put, "/v1/cas/" + digest_of("b"), "b", kSubmitToken).result(),
            http::status::forbidden);
  EXPECT_EQ(call(http::verb::get, "/v1/jobs", "", kReadToken).result(),
            http::status::service_unavailable);
}

// A sorted entry listing keeps its best rows for its later pages
// (sorted_windows.h), one window per reader. A reader never pages through a
// window another reader kept, whatever prefix and namespace it asks for: here
// its token's name is the other's grant as text, so a listing id that merely
// joined its parts with newlines would let prefix "\n" and namespace "team-b"
// spell team-b's listing and hand its rows to a reader of "x" only.
class SortedWindowReaders : public HandlerTest {
protected:
  SortedWindowReaders()
      : HandlerTest(
            {make_token("team-b", kReadToken, {{"team-b*", Role::kRead}, {"x", Role::kRead}}),
             make_token("team-b*=read", kWriteToken, {{"x", Role::kRead}})}) {}
};

TEST_F(SortedWindowReaders, NoReaderPagesThroughAnothersWindow) {
  char key[32];
  for (int i = 0; i < 20; ++i) {
    std::snprintf(key, sizeof key, "torch:team-b:b%03d", i);
    ASSERT_TRUE(store_.put(storage::Area::kAction, key, std::string(2000 + i, 'b')));
  }
  for (int i = 0; i < 3; ++i) {
    std::snprintf(key, sizeof key, "torch:x:x%03d", i);
    ASSERT_TRUE(store_.put(storage::Area::kAction, key, std::string(10 + i, 'x')));
  }
  const auto listed = [&](const std::string& query, const std::string& token) {
    const Response r =
        call(http::verb::get, "/v1/entries?area=ac&sort=size&limit=5" + query, "", token);
    EXPECT_EQ(r.result(), http::status::ok) << query << ": " << r.body();
    std::vector<std::string> keys;
    const json page = json::parse(r.body());
    for (const json& e : page["entries"]) {
      keys.push_back(e["key"]);
    }
    return keys;
  };
  // team-b's reader keeps a window of its 23 rows.
  const std::vector<std::string> first = listed("", kReadToken);
  ASSERT_EQ(first.size(), 5U);
  EXPECT_EQ(first.front(), "torch:team-b:b019");
  // The other reader, with and without the prefix and namespace that would
  // have spelled that window's id: never a row of team-b.
  for (const std::string& query : {std::string("&offset=5&prefix=%0A&namespace=team-b"),
                                   std::string("&offset=5"), std::string("&offset=0")}) {
    for (const std::string& k : listed(query, kWriteToken)) {
      EXPECT_EQ(k.rfind("torch:x:", 0), 0U) << query << " listed " << k;
    }
  }
  EXPECT_EQ(listed("&offset=5", kReadToken).front(), "torch:team-b:b014");
}

} // namespace
} // namespace kcache::service
