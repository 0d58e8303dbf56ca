// The job table on its own (no threads, no I/O) and the job enums' name
// tables.

#include <kcache/service/job.h>
#include <kcache/service/job_table.h>

#include <gtest/gtest.h>

namespace kcache::service {
namespace {

using namespace std::chrono_literals;
using Clock = JobTable::Clock;

Job job(const std::string& id, const std::string& compile_key, std::string digest = "d") {
  Job j;
  j.id = id;
  j.compile_key = compile_key;
  j.keys = {compile_key};
  j.spec_digest = std::move(digest);
  return j;
}

TEST(JobTable, OneActiveJobPerCompileKey) {
  JobTable table(10, 60s);
  EXPECT_EQ(table.active("kcc-a"), nullptr);
  table.add(job("j-1", "kcc-a"));
  Job* active = table.active("kcc-a");
  ASSERT_NE(active, nullptr);
  EXPECT_FALSE(JobTable::join(*active, "client", {"j-search"}, 0)) << "not a higher priority";
  EXPECT_FALSE(JobTable::join(*active, "client", {}, 0));
  EXPECT_TRUE(JobTable::join(*active, "other", {}, 4));
  EXPECT_EQ(active->submissions, 4U);
  EXPECT_EQ(active->keys, (std::vector<std::string>{"kcc-a", "client", "other"}));
  EXPECT_EQ(active->parents, std::vector<std::string>{"j-search"});
  EXPECT_EQ(active->priority, 4);

  const auto done = table.finish(*active, JobState::kSucceeded, 1000, Clock::now());
  EXPECT_EQ(done.job.state, JobState::kSucceeded);
  EXPECT_EQ(done.job.finished_ms, 1000);
  EXPECT_EQ(table.active("kcc-a"), nullptr) << "the next submission is a new job";
  EXPECT_NE(table.find("j-1"), nullptr) << "kept in the history";
}

TEST(JobTable, CompileFailuresAreRememberedPerSpecUntilTheTtl) {
  JobTable table(10, 60s);
  const auto now = Clock::now();
  Job& failing = table.add(job("j-1", "kcc-a", "spec-1"));
  failing.error_code = JobError::kCompileFailed;
  table.finish(failing, JobState::kFailed, 1000, now);
  const Job* previous = table.failed_recently(job("j-2", "kcc-a", "spec-1"), now);
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(previous->id, "j-1");
  EXPECT_EQ(table.failed_recently(job("j-2", "kcc-a", "spec-2"), now), nullptr)
      << "another spec with the same compile key (say, with -Werror) is not blocked";
  EXPECT_EQ(table.failed_recently(job("j-2", "kcc-a", "spec-1"), now + 61s), nullptr);
  EXPECT_EQ(table.failed_recently(job("j-2", "kcc-a", "spec-1"), now), nullptr)
      << "an expired failure is forgotten";

  Job& limited = table.add(job("j-3", "kcc-b"));
  limited.error_code = JobError::kResourceLimit;
  table.finish(limited, JobState::kFailed, 1000, now);
  EXPECT_EQ(table.failed_recently(job("j-4", "kcc-b"), now), nullptr)
      << "a resource limit says nothing about the source";
}

TEST(JobTable, RestoredFailuresKeepWhatIsLeftOfTheirTtl) {
  JobTable table(10, 60s);
  const auto now = Clock::now();
  Job recent = job("j-1", "kcc-a");
  recent.state = JobState::kFailed;
  recent.error_code = JobError::kInvalidSpec;
  recent.finished_ms = 100'000;
  EXPECT_TRUE(table.restore(recent, 130'000, now).empty());
  EXPECT_NE(table.failed_recently(job("j-2", "kcc-a"), now + 29s), nullptr);
  EXPECT_EQ(table.failed_recently(job("j-2", "kcc-a"), now + 31s), nullptr);

  Job queued = job("j-3", "kcc-b");
  table.restore(queued, 130'000, now);
  EXPECT_NE(table.active("kcc-b"), nullptr) << "a queued job is single-flight again";
}

TEST(JobTable, TheHistoryIsBoundedAndEvictionsAreReported) {
  JobTable table(2, 60s);
  std::vector<std::string> evicted;
  for (const char* id : {"j-1", "j-2", "j-3"}) {
    Job& j = table.add(job(id, std::string("kcc-") + id));
    j.error_code = JobError::kCompileFailed;
    for (std::string& e : table.finish(j, JobState::kFailed, 1000, Clock::now()).evicted) {
      evicted.push_back(std::move(e));
    }
  }
  EXPECT_EQ(evicted, std::vector<std::string>{"j-1"});
  EXPECT_EQ(table.find("j-1"), nullptr);
  EXPECT_EQ(table.failed_recently(job("j-4", "kcc-j-1"), Clock::now()), nullptr)
      << "its failure goes with it";
  EXPECT_EQ(table.finished(), 2U);
  EXPECT_EQ(table.list(JobState::kFailed, 10).size(), 2U);
  EXPECT_EQ(table.list(JobState::kQueued, 10).size(), 0U);
}

TEST(JobTable, AHistoryOfNoneKeepsNothing) {
  JobTable table(0, 60s);
  Job& j = table.add(job("j-1", "kcc-a"));
  const auto done = table.finish(j, JobState::kSucceeded, 1000, Clock::now());
  EXPECT_EQ(done.job.id, "j-1") << "the caller still gets the job as it ended";
  EXPECT_EQ(done.evicted, std::vector<std::string>{"j-1"});
  EXPECT_EQ(table.find("j-1"), nullptr);
}

// Issue 13: quotas count active jobs per submitter; a finished job keeps its
// spec's digest, not its text.
TEST(JobTable, ActiveJobsPerSubmitterAndNoSpecTextInHistory) {
  JobTable table(10, 60s);
  Job a = job("j-1", "kcc-a");
  a.submitter = "alice";
  a.spec_json = std::string(1000, 'x');
  Job& added = table.add(std::move(a));
  Job b = job("j-2", "kcc-b");
  b.submitter = "alice";
  table.add(std::move(b));
  EXPECT_EQ(table.active_jobs("alice"), 2U);
  EXPECT_EQ(table.active_jobs("bob"), 0U);
  const auto done = table.finish(added, JobState::kSucceeded, 1000, Clock::now());
  EXPECT_EQ(table.active_jobs("alice"), 1U);
  EXPECT_TRUE(done.job.spec_json.empty());
  EXPECT_TRUE(table.find("j-1")->spec_json.empty());
  EXPECT_EQ(table.find("j-1")->spec_digest, "d");
}

TEST(JobEnums, TheJournalKeepsTheDigestAndTheSubmitterListingsDoNot) {
  Job j = job("j-1", "kcc-a", "abc123");
  j.submitter = "token 0123456789ab";
  j.error_code = JobError::kInfrastructure;
  j.state = JobState::kFailed;
  auto back = job_from_json(job_to_json(j, /*with_spec=*/true));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->spec_digest, "abc123");
  EXPECT_EQ(back->submitter, "token 0123456789ab");
  EXPECT_EQ(back->error_code, JobError::kInfrastructure);
  EXPECT_FALSE(is_cacheable_failure(JobError::kInfrastructure));
  const std::string listed = job_to_json(j, /*with_spec=*/false);
  EXPECT_EQ(listed.find("abc123"), std::string::npos);
  EXPECT_EQ(listed.find("token"), std::string::npos);
  EXPECT_NE(listed.find("\"infrastructure\""), std::string::npos);
}

TEST(JobEnums, OneNameTableEachReadsBackWhatItWrites) {
  for (JobKind k : {JobKind::kCompile, JobKind::kAutotune}) {
    EXPECT_EQ(parse_job_kind(job_kind_name(k)), k);
  }
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    EXPECT_EQ(parse_job_state(job_state_name(s)), s);
  }
  for (JobError e : {JobError::kNone, JobError::kInvalidSpec, JobError::kCompileFailed,
                     JobError::kUnavailable, JobError::kInternal, JobError::kCancelled,
                     JobError::kResourceLimit, JobError::kStore, JobError::kAutotuneFailed}) {
    EXPECT_EQ(parse_job_error(job_error_name(e)), e);
  }
  EXPECT_EQ(job_error_name(JobError::kResourceLimit), "resource-limit");
  EXPECT_EQ(parse_job_state("done").error(),
            "unknown job state 'done' (queued, running, succeeded, failed, cancelled)");
  EXPECT_FALSE(parse_job_kind("benchmark").has_value());
  EXPECT_FALSE(parse_job_error("oops").has_value());
}

TEST(JobEnums, JournalRecordsWithUnknownNamesAreRefused) {
  Job j = job("j-1", "kcc-a");
  j.kind = JobKind::kAutotune;
  j.state = JobState::kFailed;
  j.error_code = JobError::kAutotuneFailed;
  const std::string text = job_to_json(j, true);
  auto back = job_from_json(text);
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(back->kind, JobKind::kAutotune);
  EXPECT_EQ(back->error_code, JobError::kAutotuneFailed);
  std::string bad_kind = text;
  bad_kind.replace(bad_kind.find("\"autotune\""), 10, "\"nonsense\"");
  EXPECT_FALSE(job_from_json(bad_kind).has_value());
  std::string bad_code = text;
  bad_code.replace(bad_code.find("autotune-failed"), 15, "nonsense-codes!");
  EXPECT_FALSE(job_from_json(bad_code).has_value());
}

} // namespace
} // namespace kcache::service
