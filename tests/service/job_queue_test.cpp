// The job queue's order and bound, the job record's JSON, the journal's
// durability across reopening, and LocalJobQueue (both behind JobQueue).

#include "temp_dir.h"

#include <kcache/service/job.h>
#include <kcache/service/job_journal.h>
#include <kcache/service/job_priority_queue.h>
#include <kcache/service/job_queue_local.h>

#include <gtest/gtest.h>

namespace kcache::service {
namespace {

TEST(JobPriorityQueue, HighestPriorityFirstThenFifo) {
  JobPriorityQueue q(10);
  ASSERT_TRUE(q.push("low-1", 0));
  ASSERT_TRUE(q.push("high", 5));
  ASSERT_TRUE(q.push("low-2", 0));
  ASSERT_TRUE(q.push("mid", 1));
  EXPECT_EQ(q.position("high"), 0U);
  EXPECT_EQ(q.position("low-2"), 3U);
  EXPECT_EQ(q.pop(), "high");
  EXPECT_EQ(q.pop(), "mid");
  EXPECT_EQ(q.pop(), "low-1");
  EXPECT_EQ(q.pop(), "low-2");
  EXPECT_EQ(q.pop(), std::nullopt);
}

TEST(JobPriorityQueue, BoundedUnlessForcedAndRemovable) {
  JobPriorityQueue q(2);
  EXPECT_TRUE(q.push("a", 0));
  EXPECT_TRUE(q.push("b", 0));
  EXPECT_FALSE(q.push("c", 0)) << "a full queue refuses";
  EXPECT_TRUE(q.push("c", 0, /*force=*/true)) << "jobs resumed from the journal are never dropped";
  EXPECT_FALSE(q.push("a", 0, true)) << "no duplicates";
  EXPECT_TRUE(q.remove("b"));
  EXPECT_FALSE(q.remove("b"));
  EXPECT_EQ(q.position("b"), std::nullopt);
  EXPECT_EQ(q.size(), 2U);
}

Job sample() {
  Job job;
  job.id = new_job_id();
  job.compile_key = "kcc-" + std::string(64, 'a');
  job.keys = {job.compile_key, "kc1-client"};
  job.spec_json = R"({"backend":"cpp"})";
  job.backend = "cpp";
  job.target = "x86-64-v3";
  job.entry = "scale";
  job.output = "shared";
  job.priority = 3;
  job.state = JobState::kFailed;
  job.submitted_ms = 1;
  job.started_ms = 2;
  job.finished_ms = 3;
  job.attempts = 2;
  job.submissions = 7;
  job.error_code = JobError::kCompileFailed;
  job.error_message = "clang could not compile the source";
  job.log = "k.cpp:1:9: error: expected expression";
  job.output_size = 0;
  job.compile_ms = 36;
  return job;
}

TEST(Job, JsonRoundTripKeepsEveryField) {
  const Job job = sample();
  auto back = job_from_json(job_to_json(job, /*with_spec=*/true));
  ASSERT_TRUE(back.has_value()) << back.error();
  EXPECT_EQ(job_to_json(*back, true), job_to_json(job, true));
  EXPECT_EQ(job_from_json(job_to_json(job, false))->spec_json, "") << "listings leave the spec out";
  EXPECT_FALSE(job_from_json("{\"id\": 3}").has_value());
  // Found by parsers_fuzzer: a float where an integer belongs was cast (UB).
  EXPECT_FALSE(job_from_json(R"({"id": "j-1", "compile_key": "kcc-a", "state": "failed",
                                 "attempts": 2.2e37})")
                   .has_value());
  EXPECT_FALSE(job_from_json(R"({"id": "j-1", "compile_key": "kcc-a", "state": "failed",
                                 "attempts": -1})")
                   .has_value());
  EXPECT_FALSE(job_from_json("not json").has_value());
  EXPECT_NE(new_job_id(), new_job_id());
}

TEST(JobJournal, RecordsSurviveReopening) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "jobs").string();
  Job a = sample();
  Job b = sample();
  b.state = JobState::kRunning;
  {
    auto journal = JobJournal::open(path);
    ASSERT_TRUE(journal.has_value()) << journal.error();
    ASSERT_TRUE((*journal)->put(a).has_value());
    ASSERT_TRUE((*journal)->put(b).has_value());
    b.attempts = 3;
    ASSERT_TRUE((*journal)->put(b).has_value()) << "a put replaces the record";
  }
  auto journal = JobJournal::open(path);
  ASSERT_TRUE(journal.has_value());
  auto jobs = (*journal)->load();
  ASSERT_EQ(jobs.size(), 2U);
  for (const Job& j : jobs) {
    EXPECT_EQ(job_to_json(j, true), job_to_json(j.id == a.id ? a : b, true));
  }
  ASSERT_TRUE((*journal)->erase(a.id).has_value());
  EXPECT_EQ((*journal)->load().size(), 1U);
}

// LocalJobQueue through the JobQueue interface: the priority order, and the
// records in the journal (or, without one, in memory).
TEST(JobQueue, LocalQueueOrdersJobsAndKeepsTheirRecords) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "jobs").string();
  const Job job = sample();
  {
    auto opened = LocalJobQueue::open(2, path);
    ASSERT_TRUE(opened.has_value()) << opened.error();
    JobQueue& queue = **opened;
    EXPECT_TRUE(queue.push("low", 0, false));
    EXPECT_TRUE(queue.push("high", 5, false));
    EXPECT_FALSE(queue.push("more", 0, false)) << "full";
    EXPECT_EQ(queue.capacity(), 2U);
    EXPECT_EQ(queue.position("low"), 1U);
    EXPECT_EQ(queue.pop(), "high");
    ASSERT_TRUE(queue.put(job).has_value());
  }
  auto reopened = LocalJobQueue::open(2, path);
  ASSERT_TRUE(reopened.has_value()) << reopened.error();
  EXPECT_EQ((*reopened)->size(), 0U) << "the order is rebuilt from the records at startup";
  ASSERT_EQ((*reopened)->load().size(), 1U);
  EXPECT_EQ(job_to_json((*reopened)->load().front(), true), job_to_json(job, true));

  LocalJobQueue memory(4, nullptr);
  ASSERT_TRUE(memory.put(job).has_value());
  EXPECT_EQ(memory.load().size(), 1U);
  ASSERT_TRUE(memory.erase(job.id).has_value());
  EXPECT_TRUE(memory.load().empty());
}

} // namespace
} // namespace kcache::service
