#include <kcache/protocol/job.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/lease.h>

#include <gtest/gtest.h>

namespace kcache::protocol {
namespace {

JobView failed_autotune() {
  JobView job;
  job.id = "j-0123456789abcdef";
  job.kind = JobKind::kAutotune;
  job.compile_key = "kcc-abc";
  job.keys = {"kcc-abc", "user-key"};
  job.backend = "cpu";
  job.target = "x86_64";
  job.entry = "matmul";
  job.output = "object";
  job.priority = 3;
  job.state = JobState::kFailed;
  job.submitted_ms = 10;
  job.started_ms = 20;
  job.finished_ms = 30;
  job.attempts = 1;
  job.submissions = 2;
  job.error_code = JobError::kAutotuneFailed;
  job.error_message = "no variant ran";
  job.log = "tail";
  job.parents = {"j-1"};
  job.tuning_class = "cpu-x";
  job.progress_done = 2;
  job.progress_total = 4;
  job.spec_json = R"({"source":"..."})";
  return job;
}

// The daemon's job JSON, byte for byte: clients and the python tests read it.
TEST(JobJson, RendersTheWireFormat) {
  EXPECT_EQ(json_text(to_json(failed_autotune(), /*with_spec=*/false)),
            R"({"attempts":1,"backend":"cpu","compile_key":"kcc-abc","compile_ms":0,)"
            R"("entry":"matmul","error":{"code":"autotune-failed","message":"no variant ran"},)"
            R"("finished_ms":30,"id":"j-0123456789abcdef","keys":["kcc-abc","user-key"],)"
            R"("kind":"autotune","log":"tail","output":"object","output_size":0,)"
            R"("parents":["j-1"],"priority":3,"progress":{"done":2,"total":4},)"
            R"("started_ms":20,"state":"failed","submissions":2,"submitted_ms":10,)"
            R"("target":"x86_64","tuning_class":"cpu-x"})");
  JobView plain;
  plain.id = "j-1";
  plain.compile_key = "kcc-1";
  EXPECT_EQ(json_text(to_json(plain, false)),
            R"({"attempts":0,"backend":"","compile_key":"kcc-1","compile_ms":0,"entry":"",)"
            R"("finished_ms":0,"id":"j-1","keys":[],"kind":"compile","output":"",)"
            R"("output_size":0,"priority":0,"started_ms":0,"state":"queued","submissions":1,)"
            R"("submitted_ms":0,"target":""})");
}

TEST(JobJson, RoundTripsWithAndWithoutTheSpec) {
  const JobView job = failed_autotune();
  for (const bool with_spec : {false, true}) {
    auto back = job_from_json_text(json_text(to_json(job, with_spec)));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(json_text(to_json(*back, true)),
              json_text(to_json(with_spec ? job : [&] {
                JobView j = job;
                j.spec_json.clear();
                return j;
              }(),
                                true)));
    EXPECT_TRUE(back->finished());
  }
}

// kc1- keys' manifests travel with the spec (journal, cluster stream), not
// in listings; a job written before they did reads as having none.
TEST(JobJson, ManifestsTravelWithTheSpecOnly) {
  JobView job = failed_autotune();
  job.manifests = {{"kc1-aa", R"({"namespace":"team-a"})"}};
  EXPECT_FALSE(to_json(job, false).contains("manifests"));
  auto back = job_from_json_text(json_text(to_json(job, true)));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->manifests, job.manifests);
  auto old = job_from_json_text(R"({"id":"j","compile_key":"k","state":"queued","spec":"{}"})");
  ASSERT_TRUE(old.has_value()) << old.error();
  EXPECT_TRUE(old->manifests.empty());
}

TEST(JobJson, RefusesUnknownNamesAndBadRecords) {
  EXPECT_FALSE(job_from_json_text("[]").has_value());
  EXPECT_FALSE(job_from_json_text(R"({"id":"j","compile_key":"k","state":"dreaming"})"));
  EXPECT_FALSE(
      job_from_json_text(R"({"id":"j","compile_key":"k","state":"queued","priority":1.5})"));
  EXPECT_FALSE(job_from_json_text(R"({"id":"j","compile_key":"k","state":"queued",)"
                                  R"("error":{"code":"oops"}})"));
  EXPECT_FALSE(job_from_json_text(std::string(100'000, '[')).has_value());
  EXPECT_EQ(parse_job_state("nope").error(),
            "unknown job state 'nope' (queued, running, succeeded, failed, cancelled)");
}

TEST(LeaseJson, CachedGrantedAndHeldElsewhere) {
  Lease cached;
  cached.cached = true;
  EXPECT_EQ(json_text(to_json(cached)), R"({"cached":true,"granted":false})");
  Lease granted{true, false, "tok", "rank0", std::chrono::milliseconds(500)};
  EXPECT_EQ(
      json_text(to_json(granted)),
      R"({"cached":false,"expires_in_ms":500,"granted":true,"holder":"rank0","token":"tok"})");
  Lease other{false, false, "", "rank1", std::chrono::milliseconds(20)};
  EXPECT_EQ(json_text(to_json(other)),
            R"({"cached":false,"expires_in_ms":20,"granted":false,"holder":"rank1"})");
  for (const Lease& lease : {cached, granted, other}) {
    auto back = lease_from_json(to_json(lease));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(json_text(to_json(*back)), json_text(to_json(lease)));
  }
  EXPECT_FALSE(lease_from_json(nlohmann::json::array()).has_value());
}

} // namespace
} // namespace kcache::protocol
