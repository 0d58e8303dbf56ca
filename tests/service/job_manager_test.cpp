// JobManager over the test runner: single-flight, priority, cancel, the
// negative cache and journal replay, in milliseconds and with no compiler.
// (tests/service/jobs_integration_test.cpp runs the same against real
// kcache-worker processes.)

#include "job_test_runner.h"
#include "temp_dir.h"

#include <kcache/service/job_manager.h>
#include <kcache/service/job_queue_local.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <future>
#include <thread>

namespace kcache::service {
namespace {

using namespace std::chrono_literals;

std::string spec(const std::string& text, std::vector<std::string> options = {"-O2"}) {
  return nlohmann::json{{"backend", "cpp"},
                        {"source", {{"name", "kernel.cpp"}, {"text", text}}},
                        {"options", options},
                        {"target", "x86-64-v2"},
                        {"output", "object"}}
      .dump();
}

Submission submission(const std::string& text, int priority = 0, std::string key = "") {
  return Submission{std::move(key), spec(text), priority, "", ""};
}

class JobManagerTest : public ::testing::Test {
protected:
  JobsConfig config() {
    JobsConfig c;
    c.workers = 1;
    c.queue_capacity = 8;
    c.negative_ttl = 60s;
    c.tuning_class = "test-cpu"; // no hardware detection
    return c;
  }

  // A manager over a fresh test runner and `queue` (in memory by default).
  std::unique_ptr<JobManager> start(const JobsConfig& c,
                                    std::unique_ptr<JobQueue> queue = nullptr) {
    auto runner = std::make_unique<TestRunner>();
    runner_ = runner.get();
    if (!queue) {
      queue = std::make_unique<LocalJobQueue>(c.queue_capacity, nullptr);
    }
    return JobManager::create(c, std::move(runner), std::move(queue), store_, metrics_);
  }

  // The job once it finishes (or as it is after 5 s).
  static Job finished(JobManager& m, const std::string& id) {
    std::promise<std::optional<Job>> done;
    auto got = done.get_future();
    m.wait(id, std::chrono::steady_clock::now() + 5s,
           [&done](JobLookup found) { done.set_value(std::move(found.job)); });
    std::optional<Job> job = got.get();
    EXPECT_TRUE(job.has_value());
    return job.value_or(Job{});
  }

  storage::MemoryStore store_{64 << 20};
  MetricsRegistry metrics_;
  TestRunner* runner_ = nullptr; // owned by the manager
};

TEST_F(JobManagerTest, OneCompileForEverySubmissionOfTheSameSpec) {
  auto m = start(config());
  const SubmitResult first = m->submit(submission("block a"));
  ASSERT_EQ(first.status, SubmitStatus::kQueued) << first.message;
  const SubmitResult second = m->submit(submission("block a", 0, "client-key"));
  ASSERT_EQ(second.status, SubmitStatus::kJoined) << second.message;
  EXPECT_EQ(second.job->id, first.job->id);
  EXPECT_EQ(second.job->submissions, 2U);
  runner_->open();
  const Job done = finished(*m, first.job->id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_EQ(runner_->started(1).size(), 1U) << "one compile";
  // Published under the compile key and the client's key before waking us.
  storage::ArtifactStore artifacts(store_);
  for (const std::string& key : {done.compile_key, std::string("client-key")}) {
    auto record = artifacts.get_record(key);
    EXPECT_TRUE(record && *record) << key;
  }
  EXPECT_EQ(m->submit(submission("block a")).status, SubmitStatus::kCached);
}

TEST_F(JobManagerTest, HigherPriorityRunsFirstAndJoiningRaisesIt) {
  auto m = start(config());
  const SubmitResult blocker = m->submit(submission("block first"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  const SubmitResult low = m->submit(submission("low", 0));
  const SubmitResult mid = m->submit(submission("mid", 1));
  const SubmitResult high = m->submit(submission("high", 5));
  EXPECT_EQ(m->queue_position(high.job->id), 0U);
  EXPECT_EQ(m->queue_position(low.job->id), 2U);
  // The same compile at a higher priority moves the job up.
  EXPECT_EQ(m->submit(submission("low", 9)).status, SubmitStatus::kJoined);
  EXPECT_EQ(m->queue_position(low.job->id), 0U);
  runner_->open();
  EXPECT_EQ(finished(*m, mid.job->id).state, JobState::kSucceeded);
  EXPECT_EQ(runner_->started(4), (std::vector<std::string>{"block first", "low", "high", "mid"}));
  EXPECT_EQ(m->find(blocker.job->id).job->state, JobState::kSucceeded);
}

TEST_F(JobManagerTest, CancelAQueuedJobAtOnceAndARunningOneThroughItsRunner) {
  auto m = start(config());
  const SubmitResult running = m->submit(submission("block running"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  const SubmitResult queued = m->submit(submission("queued"));
  const std::optional<Job> cancelled = m->cancel(queued.job->id).job;
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->error_code, JobError::kCancelled);
  EXPECT_EQ(m->queue_position(queued.job->id), std::nullopt);

  EXPECT_EQ(m->cancel(running.job->id).job->state, JobState::kRunning) << "its worker stops it";
  const Job done = finished(*m, running.job->id);
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(job_error_name(done.error_code), "cancelled");
  EXPECT_EQ(m->cancel("j-unknown").job, std::nullopt);
  EXPECT_EQ(m->counts().finished, 2U);
  EXPECT_EQ(runner_->runs(), 1U) << "the queued job never ran";
}

TEST_F(JobManagerTest, CompileFailuresAreRememberedForTheirTtlResourceLimitsAreNot) {
  auto m = start(config());
  const SubmitResult failing = m->submit(submission("fail"));
  const Job failed = finished(*m, failing.job->id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.error_code, JobError::kCompileFailed);
  const SubmitResult again = m->submit(submission("fail"));
  EXPECT_EQ(again.status, SubmitStatus::kFailedRecently);
  EXPECT_EQ(again.job->id, failed.id);
  // Every byte of the spec counts: another option is another spec.
  EXPECT_EQ(m->submit(Submission{"", spec("fail", {"-O2", "-Wall"}), 0, "", ""}).status,
            SubmitStatus::kQueued);

  const SubmitResult oom = m->submit(submission("oom"));
  EXPECT_EQ(finished(*m, oom.job->id).error_code, JobError::kResourceLimit);
  EXPECT_EQ(m->submit(submission("oom")).status, SubmitStatus::kQueued);
}

TEST_F(JobManagerTest, NoNegativeCacheWithAZeroTtl) {
  JobsConfig c = config();
  c.negative_ttl = 0s;
  auto m = start(c);
  const SubmitResult failing = m->submit(submission("fail"));
  finished(*m, failing.job->id);
  EXPECT_EQ(m->submit(submission("fail")).status, SubmitStatus::kQueued);
}

TEST_F(JobManagerTest, AFullQueueIsBusyAndInvalidSpecsAreRefused) {
  JobsConfig c = config();
  c.queue_capacity = 1;
  auto m = start(c);
  m->submit(submission("block one"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  EXPECT_EQ(m->submit(submission("two")).status, SubmitStatus::kQueued);
  EXPECT_EQ(m->submit(submission("three")).status, SubmitStatus::kBusy);
  EXPECT_EQ(m->submit(Submission{"", "{}", 0, "", ""}).status, SubmitStatus::kInvalid);
  nlohmann::json cuda = nlohmann::json::parse(spec("x"));
  cuda["backend"] = "cuda";
  cuda["target"] = "sm_90";
  cuda["output"] = "cubin";
  const SubmitResult unavailable = m->submit(Submission{"", cuda.dump(), 0, "", ""});
  EXPECT_EQ(unavailable.status, SubmitStatus::kUnavailable);
  EXPECT_NE(unavailable.message.find("not built into the test runner"), std::string::npos)
      << unavailable.message;
  runner_->open();
}

TEST_F(JobManagerTest, ShutdownAnswersWaitersAndKeepsRunningJobsQueued) {
  auto m = start(config());
  const SubmitResult running = m->submit(submission("block"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  std::promise<std::optional<Job>> answered;
  m->wait(running.job->id, std::chrono::steady_clock::now() + 60s,
          [&](JobLookup found) { answered.set_value(std::move(found.job)); });
  m->shutdown();
  EXPECT_EQ(answered.get_future().get()->state, JobState::kRunning);
  EXPECT_EQ(m->find(running.job->id).job->state, JobState::kQueued) << "it runs after a restart";
  EXPECT_EQ(m->submit(submission("late")).status, SubmitStatus::kUnavailable);
}

TEST_F(JobManagerTest, TheJournalBringsBackQueuedJobsAndRecentFailures) {
  kcache::testing::TempDir dir;
  const std::string journal = (dir.path() / "jobs").string();
  std::string interrupted, waiting, failed;
  {
    auto queue = LocalJobQueue::open(8, journal);
    ASSERT_TRUE(queue.has_value()) << queue.error();
    auto m = start(config(), std::move(*queue));
    failed = m->submit(submission("fail")).job->id;
    EXPECT_EQ(finished(*m, failed).state, JobState::kFailed);
    interrupted = m->submit(submission("block interrupted")).job->id;
    ASSERT_EQ(runner_->started(2).size(), 2U);
    waiting = m->submit(submission("waiting", 3)).job->id;
  } // shut down: the running compile is cancelled and stays queued
  auto queue = LocalJobQueue::open(8, journal);
  ASSERT_TRUE(queue.has_value()) << queue.error();
  auto m = start(config(), std::move(*queue));
  runner_->open();
  const Job resumed = finished(*m, interrupted);
  EXPECT_EQ(resumed.state, JobState::kSucceeded);
  EXPECT_EQ(resumed.attempts, 2U) << "it started once before the restart";
  EXPECT_EQ(finished(*m, waiting).state, JobState::kSucceeded);
  EXPECT_EQ(runner_->started(2), (std::vector<std::string>{"waiting", "block interrupted"}))
      << "priority order survives the restart";
  const SubmitResult again = m->submit(submission("fail"));
  EXPECT_EQ(again.status, SubmitStatus::kFailedRecently);
  EXPECT_EQ(again.job->id, failed);
}

TEST_F(JobManagerTest, AJobInterruptedTooOftenFailsInsteadOfRunningAgain) {
  auto queue = std::make_unique<LocalJobQueue>(8, nullptr);
  Job job;
  job.id = new_job_id();
  job.compile_key = "kcc-x";
  job.keys = {job.compile_key};
  job.spec_json = spec("block");
  job.state = JobState::kRunning;
  job.attempts = 3;
  ASSERT_TRUE(queue->put(job).has_value());
  JobsConfig c = config();
  c.max_attempts = 3;
  auto m = start(c, std::move(queue));
  const std::optional<Job> now = m->find(job.id).job;
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->state, JobState::kFailed);
  EXPECT_EQ(now->error_code, JobError::kInternal);
  EXPECT_EQ(runner_->runs(), 0U);
}

TEST_F(JobManagerTest, TheHistoryIsBounded) {
  JobsConfig c = config();
  c.history = 2;
  auto m = start(c);
  std::vector<std::string> ids;
  for (const char* text : {"one", "two", "three"}) {
    ids.push_back(m->submit(submission(text)).job->id);
    finished(*m, ids.back());
    std::this_thread::sleep_for(2ms); // listings order by submission time
  }
  EXPECT_EQ(m->find(ids[0]).job, std::nullopt);
  EXPECT_EQ(m->list(std::nullopt, 10).size(), 2U);
  EXPECT_EQ(m->list(JobState::kSucceeded, 1).front().id, ids[2]) << "newest first";
}

// An autotune search over three variants (or `unrolls`); the reference is
// the first one's compile (one job for both: single-flight).
std::string search(const std::string& text, std::vector<int> unrolls = {1, 2, 4}) {
  nlohmann::json doc = nlohmann::json::parse(spec(text));
  doc["output"] = "shared";
  doc["name_expressions"] = {"sum"};
  doc["autotune"] = {{"params", {{"UNROLL", unrolls}}},
                     {"benchmark",
                      {{"shapes", {{"N", 64}}},
                       {"args",
                        {{{"buffer", "x"}, {"count", "N"}, {"seed", 3}},
                         {{"buffer", "out"}, {"count", "1"}, {"output", true}},
                         {{"scalar", "N"}, {"dtype", "i32"}}}},
                       {"reference", {{"UNROLL", 1}}}}}};
  return doc.dump();
}

TEST_F(JobManagerTest, AnAutotuneSearchCompilesItsVariantsThenPublishesTheWinner) {
  auto m = start(config());
  const SubmitResult submitted = m->submit(Submission{"", search("sum"), 0, "", ""});
  ASSERT_EQ(submitted.status, SubmitStatus::kQueued) << submitted.message;
  EXPECT_EQ(submitted.job->kind, JobKind::kAutotune);
  EXPECT_EQ(submitted.job->tuning_class, "test-cpu");
  const Job done = finished(*m, submitted.job->id);
  ASSERT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(runner_->runs(), 3U) << "three variants; the reference joined the first";
  EXPECT_EQ(done.progress_done, done.progress_total);
  storage::ArtifactStore artifacts(store_);
  auto record = artifacts.get_record(done.compile_key);
  ASSERT_TRUE(record && *record);
  EXPECT_EQ((*record)->metadata.at("autotune_winner"), "UNROLL=4") << "the fastest";
  EXPECT_EQ((*record)->metadata.at("tuning_class"), "test-cpu");
  // Its variants are ordinary compile jobs in the cache: searching again is a hit.
  EXPECT_EQ(m->submit(Submission{"", search("sum"), 0, "", ""}).status, SubmitStatus::kCached);
  EXPECT_EQ(m->submit(Submission{"", search("sum"), 0, "other-class", ""}).status,
            SubmitStatus::kUnavailable)
      << "variants are timed on this node's hardware only";
}

TEST_F(JobManagerTest, CancellingASearchWhileItsVariantsCompile) {
  auto m = start(config());
  const SubmitResult submitted = m->submit(Submission{"", search("block sum"), 0, "", ""});
  ASSERT_EQ(submitted.status, SubmitStatus::kQueued) << submitted.message;
  ASSERT_EQ(runner_->started(1).size(), 1U);
  const std::optional<Job> cancelled = m->cancel(submitted.job->id).job;
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->error_message, "cancelled before its benchmark ran");
  runner_->open();
  // Its variants still compile (other searches may share them), and nothing
  // benchmarks them.
  for (const Job& j : m->list(std::nullopt, 10)) {
    if (j.kind == JobKind::kCompile) {
      EXPECT_EQ(finished(*m, j.id).state, JobState::kSucceeded);
    }
  }
  EXPECT_EQ(m->find(submitted.job->id).job->state, JobState::kCancelled);
}

// Issue 13: an autotune search's variant compiles count against the queue's
// capacity and the submitter's quota; a search that can never fit is a 400,
// one that does not fit now a 503.
TEST_F(JobManagerTest, ASearchsVariantsCountAgainstTheQueueAndTheQuota) {
  JobsConfig c = config(); // queue_capacity 8
  auto m = start(c);
  std::vector<int> many;
  for (int i = 1; i <= 20; ++i) {
    many.push_back(i);
  }
  const SubmitResult huge = m->submit(Submission{"", search("sum", many), 0, "", "alice"});
  EXPECT_EQ(huge.status, SubmitStatus::kInvalid);
  EXPECT_NE(huge.message.find("queue_capacity 8"), std::string::npos) << huge.message;
  EXPECT_EQ(m->counts().queued, 0U);
  EXPECT_EQ(runner_->runs(), 0U) << "nothing of it was admitted";

  // 4 queued behind a running one leave 4 slots: a search adding 5 (itself,
  // 3 variants and the reference) is busy.
  m->submit(submission("block a"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  for (const char* text : {"b", "c", "d", "e"}) {
    ASSERT_EQ(m->submit(submission(text)).status, SubmitStatus::kQueued);
  }
  const SubmitResult busy = m->submit(Submission{"", search("sum"), 0, "", "alice"});
  EXPECT_EQ(busy.status, SubmitStatus::kBusy) << busy.message;
  EXPECT_LE(m->counts().queued, c.queue_capacity);
  runner_->open();
}

TEST_F(JobManagerTest, ASubmitterIsCappedAtItsQuotaOthersAreNot) {
  JobsConfig c = config();
  c.max_jobs_per_submitter = 2;
  auto m = start(c);
  auto as = [](const std::string& text, const std::string& who) {
    return Submission{"", spec(text), 0, "", who};
  };
  ASSERT_EQ(m->submit(as("block 1", "alice")).status, SubmitStatus::kQueued);
  ASSERT_EQ(m->submit(as("block 2", "alice")).status, SubmitStatus::kQueued);
  const SubmitResult third = m->submit(as("block 3", "alice"));
  EXPECT_EQ(third.status, SubmitStatus::kBusy);
  EXPECT_NE(third.message.find("max_jobs_per_submitter is 2"), std::string::npos) << third.message;
  EXPECT_EQ(m->submit(as("block 1", "bob")).status, SubmitStatus::kJoined) << "no new job";
  const SubmitResult bobs = m->submit(as("block 4", "bob"));
  ASSERT_EQ(bobs.status, SubmitStatus::kQueued);
  // A search adding more than the quota can never run for anyone.
  EXPECT_EQ(m->submit(Submission{"", search("sum"), 0, "", "carol"}).status,
            SubmitStatus::kInvalid);
  runner_->open();
  // By its id: submitted again, a job that already finished is a cache hit.
  finished(*m, bobs.job->id);
  // Alice's jobs finished: her quota is free again.
  for (const Job& j : m->list(std::nullopt, 10)) {
    finished(*m, j.id);
  }
  EXPECT_EQ(m->submit(as("block 3", "alice")).status, SubmitStatus::kQueued);
}

TEST_F(JobManagerTest, ASpecOverMaxSpecBytesIsRefusedAndHistoryKeepsNoSpecs) {
  JobsConfig c = config();
  c.max_spec_bytes = 1000;
  auto m = start(c);
  const SubmitResult large = m->submit(submission(std::string(1001, 'x')));
  EXPECT_EQ(large.status, SubmitStatus::kTooLarge);
  EXPECT_NE(large.message.find("max_spec_bytes (1000 bytes)"), std::string::npos) << large.message;
  // Longer than any spec within the limit can be as JSON: refused unparsed.
  const std::string huge(JobIntake::max_text_bytes(1000) + 1, ' ');
  EXPECT_EQ(m->submit(Submission{"", huge, 0, "", ""}).status, SubmitStatus::kTooLarge);

  const SubmitResult ok = m->submit(submission(std::string(900, 'y')));
  ASSERT_EQ(ok.status, SubmitStatus::kQueued);
  EXPECT_FALSE(ok.job->spec_json.empty()) << "an active job keeps its spec";
  const Job done = finished(*m, ok.job->id);
  EXPECT_EQ(done.state, JobState::kSucceeded);
  EXPECT_TRUE(m->find(ok.job->id).job->spec_json.empty()) << "history keeps no spec text";
  EXPECT_FALSE(m->find(ok.job->id).job->spec_digest.empty());
  EXPECT_EQ(m->find(ok.job->id).job->entry, "kernel.cpp") << "names stay";
}

TEST_F(JobManagerTest, AFailedSpecIsRememberedAcrossARestartWithoutItsText) {
  kcache::testing::TempDir dir;
  const std::string journal = (dir.path() / "jobs").string();
  {
    auto queue = LocalJobQueue::open(8, journal);
    ASSERT_TRUE(queue.has_value()) << queue.error();
    auto m = start(config(), std::move(*queue));
    const Job failed = finished(*m, m->submit(submission("fail")).job->id);
    EXPECT_EQ(failed.error_code, JobError::kCompileFailed);
  }
  auto queue = LocalJobQueue::open(8, journal);
  ASSERT_TRUE(queue.has_value()) << queue.error();
  auto m = start(config(), std::move(*queue));
  EXPECT_EQ(m->submit(submission("fail")).status, SubmitStatus::kFailedRecently);
}

// Issue 13: a worker killed mid-compile (the OOM killer, kill -9) is the
// machinery's failure: retried with back-off, never negatively cached.
TEST_F(JobManagerTest, AKilledWorkerIsRetriedAndSucceeds) {
  JobsConfig c = config();
  c.retry_backoff = 10ms;
  auto m = start(c);
  const auto start_time = std::chrono::steady_clock::now();
  const Job done = finished(*m, m->submit(submission("crash2 kernel")).job->id);
  EXPECT_EQ(done.state, JobState::kSucceeded) << done.error_message;
  EXPECT_EQ(done.attempts, 3U);
  EXPECT_EQ(runner_->runs(), 3U);
  EXPECT_GE(std::chrono::steady_clock::now() - start_time, 30ms) << "10 ms, then 20 ms";
}

TEST_F(JobManagerTest, AWorkerKilledOnEveryAttemptFailsAsInfrastructureAndIsNotCached) {
  JobsConfig c = config();
  c.retry_backoff = 1ms;
  auto m = start(c);
  const Job failed = finished(*m, m->submit(submission("crash9 kernel")).job->id);
  EXPECT_EQ(failed.state, JobState::kFailed);
  EXPECT_EQ(failed.error_code, JobError::kInfrastructure);
  EXPECT_EQ(failed.attempts, c.max_attempts);
  EXPECT_NE(failed.error_message.find("not the spec's fault"), std::string::npos);
  EXPECT_EQ(m->submit(submission("crash9 kernel")).status, SubmitStatus::kQueued)
      << "not negatively cached";
  runner_->open();
}

TEST_F(JobManagerTest, CancellingEndsARetrysBackOff) {
  JobsConfig c = config();
  c.retry_backoff = 60s;
  auto m = start(c);
  const SubmitResult crashing = m->submit(submission("crash9 kernel"));
  ASSERT_EQ(runner_->started(1).size(), 1U);
  std::this_thread::sleep_for(20ms); // into its back-off
  m->cancel(crashing.job->id);
  const Job done = finished(*m, crashing.job->id);
  EXPECT_EQ(done.state, JobState::kCancelled);
  EXPECT_EQ(runner_->runs(), 1U);
}

// The dashboard's live list: a long-poll on changes() answers when a job is
// queued, starts or ends, at once for a count that is not the current one,
// at its deadline when nothing happens, and at shutdown.
TEST_F(JobManagerTest, ListingLongPollsAnswerOnChanges) {
  auto m = start(config());
  const auto on_change = [&](std::uint64_t seen, std::chrono::milliseconds wait) {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> answered = done->get_future();
    m->wait_for_change(seen, std::chrono::steady_clock::now() + wait,
                       [done] { done->set_value(); });
    return answered;
  };
  const std::uint64_t idle = m->changes();
  auto quiet = on_change(idle, 2s);
  EXPECT_EQ(quiet.wait_for(200ms), std::future_status::timeout) << "nothing changed";
  EXPECT_EQ(quiet.wait_for(10s), std::future_status::ready) << "answered at its deadline";
  EXPECT_EQ(m->changes(), idle);

  auto queued = on_change(idle, 30s);
  const SubmitResult job = m->submit(submission("block listing"));
  ASSERT_EQ(job.status, SubmitStatus::kQueued) << job.message;
  EXPECT_EQ(queued.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(runner_->started(1).size(), 1U);
  const std::uint64_t running = m->changes();
  EXPECT_GE(running, idle + 2) << "admitted, then started";
  EXPECT_EQ(on_change(idle, 30s).wait_for(10s), std::future_status::ready) << "an old count";

  auto ended = on_change(running, 30s);
  EXPECT_EQ(ended.wait_for(200ms), std::future_status::timeout);
  runner_->open();
  EXPECT_EQ(ended.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(finished(*m, job.job->id).state, JobState::kSucceeded);

  auto last = on_change(m->changes(), 60s);
  m->shutdown();
  EXPECT_EQ(last.wait_for(10s), std::future_status::ready);
}

TEST(InfrastructureFailure, WhatCountsAsTheMachinerys) {
  using Exit = compiler::WorkerExit;
  for (const Exit exit :
       {Exit::kInternalError, Exit::kKilledBySignal, Exit::kProtocolError, Exit::kSpawnFailed}) {
    EXPECT_TRUE(is_infrastructure_failure(exit)) << compiler::worker_exit_name(exit);
  }
  for (const Exit exit : {Exit::kCompleted, Exit::kCompileError, Exit::kTimedOut,
                          Exit::kMemoryLimit, Exit::kExecFailed, Exit::kCancelled}) {
    EXPECT_FALSE(is_infrastructure_failure(exit)) << compiler::worker_exit_name(exit);
  }
}

} // namespace
} // namespace kcache::service
