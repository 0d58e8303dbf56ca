// Client's typed inspection calls against a real kcached: each answer reads
// back to the daemon's own JSON text (to_json of the typed value is the wire's
// text, byte for byte), and the queries reach the daemon as asked.

#include "kcached_process.h"

#include <kcache/client/client.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;

std::vector<std::string> worker_args() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--worker-binary", release ? env : testing::built_binary("kcache-worker"),
          "--worker-memory", release ? "4GiB" : "0"};
}

class ClientAdmin : public ::testing::Test {
protected:
  void SetUp() override {
    client::ClientOptions o;
    o.url = kcached_.url();
    o.timeout = std::chrono::milliseconds(30000);
    auto c = Client::create(o);
    ASSERT_TRUE(c.has_value());
    client_ = std::move(*c);
    client::PutOptions put;
    put.producer = "admin-test";
    put.metadata["note"] = "first";
    ASSERT_TRUE(client_->put("kc1-admin-a", {{"a.bin", std::string(100, 'a')}}, put));
    ASSERT_TRUE(client_->put("kc1-admin-b", {{"b.bin", std::string(3000, 'b')}}));
  }

  // The daemon's answer to a raw request, as text.
  std::string raw(client::HttpMethod method, const std::string& target) {
    auto res = client_->request(method, target);
    EXPECT_TRUE(res.has_value());
    EXPECT_EQ(res->status, 200) << res->body;
    return res->body;
  }

  KcachedProcess kcached_{worker_args()};
  std::unique_ptr<Client> client_;
};

TEST_F(ClientAdmin, StatsCountsTheLookups) {
  ASSERT_TRUE(client_->get("kc1-admin-a").has_value());
  ASSERT_TRUE(client_->get("kc1-admin-missing").has_value());
  auto stats = client_->stats();
  ASSERT_TRUE(stats.has_value()) << stats.error().message;
  EXPECT_GE(stats->hits, 1U);
  EXPECT_GE(stats->misses, 1U);
  ASSERT_FALSE(stats->tiers.empty());
  EXPECT_FALSE(stats->tiers[0].name.empty());
  EXPECT_GT(stats->tiers[0].puts, 0U);
  // Everything but the uptime (it moves) reads back as the daemon wrote it.
  json typed = protocol::to_json(*stats);
  json wire = json::parse(raw(client::HttpMethod::kGet, "/v1/stats"));
  typed.erase("uptime_s");
  wire.erase("uptime_s");
  EXPECT_EQ(typed, wire);
}

TEST_F(ClientAdmin, ListAsksWithItsQuery) {
  auto all = client_->list({"ac", "kc1-admin-", "size", std::nullopt});
  ASSERT_TRUE(all.has_value()) << all.error().message;
  ASSERT_EQ(all->entries.size(), 2U);
  EXPECT_EQ(all->total, 2U);
  EXPECT_EQ(all->entries[0].area, "ac");
  EXPECT_GE(all->entries[0].size, all->entries[1].size);

  auto one = client_->list({"ac", "kc1-admin-", "key", 1});
  ASSERT_TRUE(one.has_value()) << one.error().message;
  ASSERT_EQ(one->entries.size(), 1U);
  EXPECT_EQ(one->entries[0].key, "kc1-admin-a");
  EXPECT_EQ(one->total, 2U);
  EXPECT_EQ(
      protocol::json_text(protocol::to_json(*one)),
      raw(client::HttpMethod::kGet, "/v1/entries?area=ac&prefix=kc1-admin-&sort=key&limit=1"));

  auto refused = client_->list({"ac", "", "colour", std::nullopt});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().http_status, 400);
}

TEST_F(ClientAdmin, EntryReadsTheRecordAndItsStorage) {
  auto entry = client_->entry("kc1-admin-a");
  ASSERT_TRUE(entry.has_value()) << entry.error().message;
  EXPECT_EQ(entry->key, "kc1-admin-a");
  EXPECT_EQ(entry->producer, "admin-test");
  EXPECT_EQ(entry->metadata.at("note"), "first");
  ASSERT_EQ(entry->outputs.size(), 1U);
  EXPECT_EQ(entry->outputs[0].name, "a.bin");
  EXPECT_EQ(entry->outputs[0].size, 100U);
  ASSERT_TRUE(entry->storage.has_value());
  EXPECT_EQ(entry->storage->area, "ac");
  // Reading the record counts as a hit: all but "storage" reads back as written.
  json typed = *protocol::to_json(*entry);
  json wire = json::parse(raw(client::HttpMethod::kGet, "/v1/entries/kc1-admin-a"));
  EXPECT_EQ(wire["storage"]["key"], "kc1-admin-a");
  typed.erase("storage");
  wire.erase("storage");
  EXPECT_EQ(protocol::json_text(typed), protocol::json_text(wire));

  auto missing = client_->entry("kc1-admin-none");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().http_status, 404);
  EXPECT_EQ(client_->entry("not a key").error().code, client::ErrorCode::kInvalid);
}

TEST_F(ClientAdmin, VerifyAndGc) {
  auto cas = client_->verify({"cas", "", false});
  ASSERT_TRUE(cas.has_value()) << cas.error().message;
  EXPECT_EQ(cas->area, "cas");
  EXPECT_EQ(cas->checked, 2U);
  EXPECT_TRUE(cas->problems.empty());
  auto ac = client_->verify({"ac", "kc1-admin-a", true});
  ASSERT_TRUE(ac.has_value()) << ac.error().message;
  EXPECT_EQ(ac->checked, 1U);

  client::GcQuery everything;
  everything.max_size = 0;
  auto gc = client_->gc(everything);
  ASSERT_TRUE(gc.has_value()) << gc.error().message;
  EXPECT_GT(gc->before_bytes, 0U);
  EXPECT_GT(gc->removed_entries, 0U);
  EXPECT_EQ(gc->after_bytes, 0U);
  EXPECT_EQ(client_->entry("kc1-admin-a").error().http_status, 404);
}

TEST_F(ClientAdmin, RemoveBlobDeletesFromTheCas) {
  auto entry = client_->entry("kc1-admin-b");
  ASSERT_TRUE(entry.has_value()) << entry.error().message;
  const std::string digest = entry->outputs.at(0).digest;
  ASSERT_TRUE(client_->remove_blob(digest).has_value());
  auto again = client_->remove_blob(digest);
  EXPECT_TRUE(again.has_value() || again.error().http_status == 404);
  EXPECT_EQ(client_->remove_blob("kc1-admin-b").error().code, client::ErrorCode::kInvalid);
  auto report = client_->verify({"ac", "kc1-admin-b", false});
  ASSERT_TRUE(report.has_value()) << report.error().message;
  EXPECT_EQ(report->problems.size(), 1U); // the record lost its blob
}

TEST_F(ClientAdmin, JobsListsWithItsQuery) {
  const json spec{{"backend", "cpp"},
                  {"source", {{"name", "k.cpp"}, {"text", "extern \"C\" int k() { return 7; }\n"}}},
                  {"name_expressions", {"k"}},
                  {"options", {"-O1"}},
                  {"target", "x86-64-v2"},
                  {"output", "shared"}};
  auto submitted = client_->submit("kc1-admin-job", spec.dump());
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE(submitted->job.has_value()) << submitted->message;
  auto done = client_->job(submitted->job->id, std::chrono::milliseconds(60000));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  ASSERT_EQ(done->state, client::JobState::kSucceeded) << done->json;

  auto all = client_->jobs({});
  ASSERT_TRUE(all.has_value()) << all.error().message;
  ASSERT_EQ(all->jobs.size(), 1U);
  EXPECT_EQ(all->jobs[0].id, submitted->job->id);
  EXPECT_GT(all->counts.workers, 0U);
  EXPECT_EQ(all->counts.finished, 1U);
  EXPECT_EQ(protocol::json_text(protocol::to_json(*all)),
            raw(client::HttpMethod::kGet, "/v1/jobs"));

  auto queued = client_->jobs({10, client::JobState::kQueued});
  ASSERT_TRUE(queued.has_value()) << queued.error().message;
  EXPECT_TRUE(queued->jobs.empty());
  auto none = client_->jobs({0, std::nullopt});
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_TRUE(none->jobs.empty());

  // Long-poll: with nothing changed since its count, the daemon holds the
  // answer for the wait (the client's deadline covers it); asked with an
  // older count, it answers at once.
  ASSERT_TRUE(all->changes.has_value());
  const auto held_from = std::chrono::steady_clock::now();
  auto held = client_->jobs({10, std::nullopt, all->changes, std::chrono::milliseconds(1500),
                             /*logs=*/false});
  const auto held_for = std::chrono::steady_clock::now() - held_from;
  ASSERT_TRUE(held.has_value()) << held.error().message;
  EXPECT_GE(held_for, std::chrono::milliseconds(1300));
  EXPECT_EQ(held->changes, all->changes);
  ASSERT_EQ(held->jobs.size(), 1U);
  const auto quick_from = std::chrono::steady_clock::now();
  auto quick =
      client_->jobs({10, std::nullopt, *all->changes - 1, std::chrono::milliseconds(20000)});
  ASSERT_TRUE(quick.has_value()) << quick.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - quick_from, std::chrono::milliseconds(10000));
}

} // namespace
} // namespace kcache
