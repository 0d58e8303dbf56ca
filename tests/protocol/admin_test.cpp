// The inspection answers' JSON (protocol/admin.h): what to_json writes,
// from_json reads back to the same text; unknown members are skipped, members
// of the wrong type refused.

#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kcache::protocol {
namespace {

using nlohmann::json;

// The text from_json(text) renders back through to_json.
template <typename Read> std::string round_trip(const std::string& text, Read read) {
  auto value = read(json::parse(text));
  EXPECT_TRUE(value.has_value()) << value.error();
  if constexpr (std::is_same_v<decltype(to_json(*value)), json>) {
    return json_text(to_json(*value));
  } else {
    return json_text(*to_json(*value));
  }
}

TEST(AdminJson, StatsRoundTripsTheDaemonsText) {
  // A tier that cannot say what it holds (Redis) has nulls there.
  const std::string text =
      R"({"c_abi":8,"cluster":true,"errors":0,"git_revision":"abc1234","hit_ratio":0.75,"hits":3,)"
      R"("key_schema":2,"misses":1,"tiers":[{"backfills":0,"bytes_read":512,)"
      R"("bytes_stored":2048,"bytes_written":1024,"capacity":4096,"corrupt":0,"entries":3,)"
      R"("errors":0,"evictions":2,"hits":3,"misses":1,"name":"memory","puts":4,"rejected":0},)"
      R"({"backfills":0,"bytes_read":0,"bytes_stored":null,"bytes_written":0,"capacity":null,)"
      R"("corrupt":0,"entries":null,"errors":0,"evictions":0,"hits":0,"misses":0,)"
      R"("name":"redis","puts":0,"rejected":0}],"uptime_s":1.5,"version":"0.1.0",)"
      R"("zeroed_ms":0})";
  EXPECT_EQ(round_trip(text, stats_from_json), text);
  const Stats stats = *stats_from_json(json::parse(text));
  EXPECT_TRUE(stats.cluster);
  ASSERT_EQ(stats.tiers.size(), 2U);
  EXPECT_EQ(stats.tiers[0].name, "memory");
  EXPECT_EQ(stats.tiers[0].evictions, 2U);
  EXPECT_EQ(stats.tiers[0].capacity, 4096U);
  EXPECT_FALSE(stats.tiers[1].capacity.has_value());
  EXPECT_DOUBLE_EQ(stats.hit_ratio.value_or(0), 0.75);
  EXPECT_EQ(stats.version, "0.1.0");
  EXPECT_DOUBLE_EQ(stats.uptime_s, 1.5);
}

TEST(AdminJson, EntryListRoundTrips) {
  const std::string text =
      R"({"entries":[{"area":"ac","created_ms":10,"hits":2,"key":"kc1-a","last_access_ms":20,)"
      R"("size":99}],"total":7})";
  EXPECT_EQ(round_trip(text, entry_list_from_json), text);
  EXPECT_EQ(entry_list_from_json(json::parse(text))->total, 7U);
}

TEST(AdminJson, EntryRoundTripsWithManifestAndStorage) {
  const std::string text =
      R"({"created_ms":5,"key":"kc1-a","manifest":{"key":"kc1-a","schema_version":1},)"
      R"("metadata":{"compile_ms":"12"},"outputs":[{"digest":"ab","name":"k.cubin","size":3}],)"
      R"("producer":"w","storage":{"area":"ac","created_ms":5,"hits":1,"key":"kc1-a",)"
      R"("last_access_ms":6,"size":40}})";
  EXPECT_EQ(round_trip(text, entry_from_json), text);
  const Entry entry = *entry_from_json(json::parse(text));
  EXPECT_EQ(entry.metadata.at("compile_ms"), "12");
  ASSERT_TRUE(entry.storage.has_value());
  EXPECT_EQ(entry.storage->last_access_ms, 6);
  EXPECT_EQ(json::parse(entry.manifest_json)["schema_version"], 1);
}

TEST(AdminJson, EntryWithoutManifestOrStorageStaysWithout) {
  const std::string text =
      R"({"created_ms":0,"key":"torch:x","metadata":{},"outputs":[],"producer":""})";
  EXPECT_EQ(round_trip(text, entry_from_json), text);
  EXPECT_FALSE(entry_from_json(json::parse(text))->storage.has_value());
}

TEST(AdminJson, EntryWithAManifestThatIsNotJsonDoesNotRender) {
  Entry entry;
  entry.manifest_json = "{not json";
  EXPECT_FALSE(to_json(entry).has_value());
}

TEST(AdminJson, VerifyAndGcReportsRoundTrip) {
  const std::string verify =
      R"({"area":"cas","checked":4,"problems":[{"key":"ab","problem":"digest mismatch"}],)"
      R"("repaired":1})";
  EXPECT_EQ(round_trip(verify, verify_report_from_json), verify);
  EXPECT_EQ(verify_report_from_json(json::parse(verify))->problems.at(0).problem,
            "digest mismatch");
  const std::string gc =
      R"({"after_bytes":10,"before_bytes":30,"removed_bytes":20,"removed_entries":2})";
  EXPECT_EQ(round_trip(gc, gc_report_from_json), gc);
}

TEST(AdminJson, JobListRoundTripsThroughTheJobView) {
  JobList list;
  JobView job;
  job.id = "j-0123456789abcdef";
  job.compile_key = "kcc-1";
  job.keys = {"kcc-1", "kc1-x"};
  job.state = JobState::kFailed;
  job.error_code = JobError::kCompileFailed;
  job.error_message = "syntax error";
  job.log = "line 1";
  list.jobs.push_back(job);
  list.counts = {1, 2, 3, 4, 5};
  const std::string text = json_text(to_json(list));
  auto back = job_list_from_json(json::parse(text));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(json_text(to_json(*back)), text);
  ASSERT_EQ(back->jobs.size(), 1U);
  EXPECT_EQ(back->jobs[0].error_code, JobError::kCompileFailed);
  EXPECT_EQ(back->counts.queue_capacity, 5U);
}

TEST(AdminJson, UnknownMembersAreSkipped) {
  auto stats = stats_from_json(json::parse(
      R"({"hits":1,"from_the_future":{"x":[1]},"tiers":[{"name":"m","new_counter":9}]})"));
  ASSERT_TRUE(stats.has_value()) << stats.error();
  EXPECT_EQ(stats->hits, 1U);
  EXPECT_EQ(stats->tiers.at(0).name, "m");
  auto jobs = job_list_from_json(json::parse(R"({"jobs":[],"counts":{"workers":2,"new":1}})"));
  ASSERT_TRUE(jobs.has_value()) << jobs.error();
  EXPECT_EQ(jobs->counts.workers, 2U);
}

TEST(AdminJson, MembersOfTheWrongTypeAreRefused) {
  EXPECT_FALSE(stats_from_json(json::parse(R"({"hits":"3"})")).has_value());
  EXPECT_FALSE(stats_from_json(json::parse(R"({"hits":-1})")).has_value());
  EXPECT_FALSE(stats_from_json(json::parse(R"({"uptime_s":"1"})")).has_value());
  EXPECT_FALSE(stats_from_json(json::parse(R"({"tiers":{}})")).has_value());
  EXPECT_FALSE(entry_list_from_json(json::parse(R"({"entries":[{"key":1}]})")).has_value());
  EXPECT_FALSE(entry_from_json(json::parse(R"({"metadata":{"a":1}})")).has_value());
  EXPECT_FALSE(entry_from_json(json::parse(R"({"manifest":"text"})")).has_value());
  EXPECT_FALSE(verify_report_from_json(json::parse(R"({"problems":[3]})")).has_value());
  EXPECT_FALSE(gc_report_from_json(json::parse(R"({"removed_bytes":1.5})")).has_value());
  EXPECT_FALSE(job_list_from_json(json::parse(R"({"jobs":[{"id":"j"}]})")).has_value());
  EXPECT_FALSE(job_list_from_json(json::parse(R"({"counts":[]})")).has_value());
  EXPECT_FALSE(stats_from_json(json::parse("[]")).has_value());
  const auto refused = gc_report_from_json(json::parse(R"({"after_bytes":"x"})"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("after_bytes"), std::string::npos) << refused.error();
}

} // namespace
} // namespace kcache::protocol
