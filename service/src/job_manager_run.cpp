// JobManager's worker side: what a pool thread does with the job it takes
// (a compile through the runner, published before its waiters wake; or an
// autotune search's benchmark, job_manager_autotune.cpp).

#include <kcache/compiler/diagnostics.h>
#include <kcache/protocol/clock.h>
#include <kcache/service/job_manager.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

namespace kcache::service {

using compiler::CompileError;

std::optional<std::string> JobManager::take_next() {
  std::lock_guard lock(mu_);
  if (stopping_) {
    return std::nullopt;
  }
  return queue_->pop();
}

void JobManager::run_job(const std::string& id) {
  std::stop_source cancel;
  bool autotune = false;
  {
    std::lock_guard lock(mu_);
    Job& job = *table_.find(id);
    autotune = job.kind == JobKind::kAutotune;
    if (autotune) {
      if (is_finished(job.state) || !autotune_.contains(id)) {
        return; // cancelled between leaving the queue and reaching this thread
      }
    } else {
      job.state = JobState::kRunning;
      job.started_ms = protocol::unix_now_ms();
      ++job.attempts;
      journal_locked(job);
      metrics_.queue_seconds.observe(static_cast<double>(job.started_ms - job.submitted_ms) /
                                     1000.0);
    }
    running_.emplace(id, cancel);
  }
  if (autotune) {
    run_autotune(id, cancel.get_token());
  } else {
    run_compile(id, cancel.get_token());
  }
}

void JobManager::run_compile(const std::string& id, const std::stop_token& cancel) {
  JobPublisher::CompileMetadata meta;
  std::string spec_json;
  {
    std::lock_guard lock(mu_);
    const Job& job = *table_.find(id);
    spec_json = job.spec_json;
    meta = {job.id, job.compile_key, job.backend, job.target, job.output, {}, job.submitter};
  }
  const auto start = Clock::now();
  auto spec = compiler::spec_from_json(spec_json);
  compiler::WorkerOutcome result =
      spec ? compile_with_retries(id, *spec, cancel)
           : compiler::WorkerOutcome{
                 tl::unexpected(CompileError{CompileError::Code::kInvalidSpec, spec.error(), {}}),
                 {},
                 compiler::WorkerExit::kCompileError};
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics_.compile_seconds.observe(seconds);

  std::string publish_error;
  if (result.outcome) {
    // The record names the toolchain the key was computed with.
    const auto keyed = runner_->toolchains().find(spec->backend);
    meta.toolchain =
        keyed != runner_->toolchains().end() ? keyed->second.components() : result.toolchain;
    std::map<std::string, std::string> manifests; // kc1- keys', refreshed with the keys
    auto published = publisher_.publish_compile(
        *result.outcome, meta,
        [&] {
          std::lock_guard lock(mu_); // submissions joining meanwhile add keys
          const Job& job = *table_.find(id);
          manifests = job.manifests;
          return job.keys;
        },
        manifests);
    if (!published) {
      publish_error = published.error();
    }
    metrics_.ok.inc();
  } else if (result.outcome.error().code == CompileError::Code::kCancelled) {
    metrics_.cancelled.inc();
  } else {
    metrics_.failed.inc();
  }

  Callbacks callbacks;
  {
    std::lock_guard lock(mu_);
    running_.erase(id);
    Job& job = *table_.find(id);
    job.compile_ms = static_cast<std::int64_t>(seconds * 1000);
    if (result.outcome) {
      job.output_size = result.outcome->binary.size();
      job.log = compiler::log_tail(result.outcome->log, kJobLogTail);
      if (publish_error.empty()) {
        callbacks = finish_locked(job, JobState::kSucceeded).callbacks;
      } else {
        job.error_code = JobError::kStore;
        job.error_message = "the compile succeeded but storing it failed: " + publish_error;
        callbacks = finish_locked(job, JobState::kFailed).callbacks;
      }
    } else if (result.outcome.error().code == CompileError::Code::kCancelled && stopping_) {
      // Shutdown, not the user: the journal keeps it queued for the restart.
      job.state = JobState::kQueued;
      journal_locked(job);
    } else {
      const CompileError& e = result.outcome.error();
      const bool infrastructure = is_infrastructure_failure(result.exit);
      job.error_code = infrastructure ? JobError::kInfrastructure : job_error_of(e.code);
      job.error_message = infrastructure
                              ? "the compile's worker failed " + std::to_string(job.attempts) +
                                    " times (not the spec's fault): " + e.message
                              : e.message;
      job.log = compiler::log_tail(e.log, kJobLogTail);
      callbacks = finish_locked(job, e.code == CompileError::Code::kCancelled ? JobState::kCancelled
                                                                              : JobState::kFailed)
                      .callbacks;
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
}

compiler::WorkerOutcome JobManager::compile_with_retries(const std::string& id,
                                                         const compiler::CompileSpec& spec,
                                                         const std::stop_token& cancel) {
  compiler::WorkerOutcome result = runner_->run(spec, cancel);
  while (!result.outcome && is_infrastructure_failure(result.exit) && !cancel.stop_requested()) {
    std::uint32_t attempts = 0;
    {
      std::lock_guard lock(mu_);
      attempts = table_.find(id)->attempts;
    }
    if (attempts >= config_.max_attempts) {
      break;
    }
    // The worker holds its pool thread through the back-off: a host short of
    // memory gets fewer compiles at once, not more.
    const auto backoff = config_.retry_backoff * (1LL << std::min<std::uint32_t>(attempts - 1, 16));
    spdlog::warn("job {}: attempt {} of {} failed ({}: {}); retrying in {} ms", id, attempts,
                 config_.max_attempts, compiler::worker_exit_name(result.exit),
                 result.outcome.error().message, backoff.count());
    std::mutex sleep_mu;
    std::condition_variable_any sleep_cv;
    std::unique_lock sleep_lock(sleep_mu);
    sleep_cv.wait_for(sleep_lock, cancel, backoff, [] { return false; });
    if (cancel.stop_requested()) {
      return {
          tl::unexpected(CompileError{CompileError::Code::kCancelled, "the job was cancelled", {}}),
          {},
          compiler::WorkerExit::kCancelled};
    }
    {
      std::lock_guard lock(mu_);
      Job& job = *table_.find(id);
      ++job.attempts;
      journal_locked(job);
    }
    result = runner_->run(spec, cancel);
  }
  return result;
}

} // namespace kcache::service
