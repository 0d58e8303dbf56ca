// ClusterJobs: the threads of cluster mode around RedisJobQueue (taking,
// heartbeats and reclaiming, long-polls) and the calls JobManager forwards.

#include <kcache/compiler/diagnostics.h>
#include <kcache/protocol/clock.h>
#include <kcache/service/job_queue_cluster.h>

#include <spdlog/spdlog.h>

#include <set>

namespace kcache::service {

using compiler::CompileError;

namespace {

constexpr std::chrono::milliseconds kTakeBlock{1000};
constexpr std::chrono::milliseconds kPollEvery{250};
constexpr std::chrono::milliseconds kRetryAfterError{500};
// A running search's progress reaches Redis when it changed, at most this often.
constexpr std::chrono::milliseconds kProgressEvery{250};

std::vector<std::string> capabilities_of(const JobRunner& runner, const NodeHardware& hardware) {
  std::vector<compiler::Backend> backends;
  for (const auto& [backend, toolchain] : runner.toolchains()) {
    backends.push_back(backend);
  }
  return node_capabilities(backends, hardware);
}

} // namespace

ClusterJobs::ClusterJobs(const JobsConfig& jobs, const ClusterConfig& cluster,
                         const storage::RedisOptions& redis, Parts parts, MetricsRegistry& metrics)
    : jobs_(jobs), cluster_(cluster), parts_(std::move(parts)),
      redis_(storage::RedisClient::create(redis)),
      queue_(*redis_,
             ClusterQueueOptions{
                 cluster.node_id, capabilities_of(parts_.runner, parts_.hardware),
                 parts_.hardware.cpu_arch, cluster.heartbeat * 3, cluster.visibility_timeout,
                 std::chrono::hours(24),
                 std::chrono::duration_cast<std::chrono::milliseconds>(jobs.negative_ttl),
                 redis.cluster, jobs.max_jobs_per_submitter}),
      reclaimed_(metrics.counter("kcache_cluster_jobs_reclaimed_total",
                                 "Cluster jobs taken over from a stalled or dead node")) {
  metrics.describe("kcache_cluster_queue_depth", "gauge",
                   "Cluster jobs waiting or running in the streams this node serves");
  metrics.add_collector([this](std::vector<MetricsRegistry::Sample>& out) {
    out.push_back({"kcache_cluster_queue_depth", {}, static_cast<double>(depth_.load())});
  });
  events_ = storage::RedisSubscription::start(redis, {queue_.events_channel()},
                                              [this](std::string_view, std::string_view message) {
                                                if (message.starts_with("job ")) {
                                                  {
                                                    std::lock_guard lock(mu_);
                                                    poke_ = true;
                                                  }
                                                  cv_.notify_all();
                                                }
                                              });
  // Before the first take: a submission right after start finds this node.
  if (auto ok = queue_.advertise(); !ok) {
    spdlog::warn("cluster mode: advertising this node's capabilities: {}", ok.error().message);
  }
  for (unsigned i = 0; i < jobs.workers; ++i) {
    threads_.emplace_back([this](const std::stop_token& stop) { take_loop(stop); });
  }
  threads_.emplace_back([this](const std::stop_token& stop) { heartbeat_loop(stop); });
  threads_.emplace_back([this](const std::stop_token& stop) { waiter_loop(stop); });
  std::string served;
  for (const std::string& c : queue_.capabilities()) {
    served += (served.empty() ? "" : ", ") + c;
  }
  spdlog::info("cluster mode: node {} serves {} (heartbeat {} ms, visibility timeout {} ms)",
               cluster.node_id, served, cluster.heartbeat.count(),
               cluster.visibility_timeout.count());
}

std::optional<SubmitResult> ClusterJobs::submit(const Job& job, const std::string& key) {
  auto result = queue_.submit(job, key, [&]() -> std::optional<SubmitResult> {
    if (parts_.publisher.has(job.compile_key)) {
      return SubmitResult{SubmitStatus::kCached, std::nullopt, "compiled by the cluster"};
    }
    // The bound on the cluster's queue, as sampled at the last heartbeat.
    if (depth_.load() >= jobs_.queue_capacity) {
      return SubmitResult{SubmitStatus::kBusy, std::nullopt,
                          "the cluster's compile queue is full (" +
                              std::to_string(jobs_.queue_capacity) + " jobs)"};
    }
    return std::nullopt;
  });
  if (!result) {
    spdlog::warn("cluster queue unreachable ({}): job {} queued on this node",
                 result.error().message, job.id);
    return std::nullopt;
  }
  if (result->status == SubmitStatus::kCached && !result->job) {
    // Compiled by another node meanwhile: link this key to its result.
    const auto manifest = job.manifests.find(key);
    if (auto why = parts_.publisher.cached(
            key, job.compile_key, manifest == job.manifests.end() ? "" : manifest->second)) {
      return SubmitResult{SubmitStatus::kCached, std::nullopt, std::move(*why)};
    }
    return std::nullopt; // not readable here (yet): compile it locally
  }
  if (result->status == SubmitStatus::kQueued) {
    ++depth_; // until the next heartbeat samples it
  }
  return std::move(*result);
}

JobLookup ClusterJobs::find(const std::string& id) {
  auto job = queue_.find(id);
  return job ? JobLookup(std::move(*job)) : JobLookup::unavailable_now();
}

JobLookup ClusterJobs::cancel(const std::string& id) {
  auto job = queue_.cancel(id);
  if (job && *job && (*job)->finished()) {
    std::lock_guard lock(mu_);
    poke_ = true;
    cv_.notify_all();
  }
  return job ? JobLookup(std::move(*job)) : JobLookup::unavailable_now();
}

std::vector<Job> ClusterJobs::list(std::optional<JobState> state, std::size_t limit) {
  auto jobs = queue_.list(state, limit);
  return jobs ? std::move(*jobs) : std::vector<Job>();
}

std::size_t ClusterJobs::running() const {
  std::lock_guard lock(mu_);
  return running_.size();
}

void ClusterJobs::wait(const std::string& id, Clock::time_point deadline, WaitCallback done) {
  JobLookup found = find(id);
  // A job not finished waits; so does one Redis cannot read now (it may
  // answer before the deadline: the waiter asks again).
  const bool waits = found.job ? !found.job->finished() : found.unavailable;
  if (waits && deadline > Clock::now()) {
    std::unique_lock lock(mu_);
    if (!stopping_) {
      Waiters& w = waiters_[id];
      w.calls.emplace_back(deadline, std::move(done));
      if (found.job) {
        w.last = std::move(found.job);
      }
      cv_.notify_all();
      return;
    }
  }
  done(std::move(found));
}

void ClusterJobs::stop() {
  std::vector<std::pair<WaitCallback, JobLookup>> callbacks;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
    for (auto& [id, r] : running_) {
      r.cancel.request_stop();
    }
    for (auto& [id, w] : waiters_) {
      for (auto& [deadline, done] : w.calls) {
        callbacks.emplace_back(std::move(done), w.answer());
      }
    }
    waiters_.clear();
  }
  cv_.notify_all();
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  for (std::jthread& t : threads_) {
    t.request_stop();
  }
  for (std::jthread& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
  events_.reset();
}

void ClusterJobs::sleep(const std::stop_token& stop, std::chrono::milliseconds how_long) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, stop, how_long, [&] { return stopping_; });
}

void ClusterJobs::take_loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    auto claim = queue_.take(kTakeBlock);
    if (!claim) {
      spdlog::debug("cluster queue: take: {}", claim.error().message);
      sleep(stop, kRetryAfterError);
      continue;
    }
    if (!*claim) {
      continue;
    }
    if (stop.stop_requested()) {
      return; // left unacked: another node reclaims it
    }
    if ((*claim)->job.kind == JobKind::kAutotune) {
      run_search(**claim);
    } else {
      run(**claim);
    }
  }
}

compiler::WorkerOutcome ClusterJobs::compile(const RedisJobQueue::Claim& claim,
                                             const compiler::CompileSpec& spec,
                                             const std::stop_token& cancel) {
  compiler::WorkerOutcome result = parts_.runner.run(spec, cancel);
  std::uint32_t attempts = claim.job.attempts;
  while (!result.outcome && is_infrastructure_failure(result.exit) && !cancel.stop_requested() &&
         attempts < jobs_.max_attempts) {
    const auto backoff = jobs_.retry_backoff * (1LL << std::min<std::uint32_t>(attempts - 1, 16));
    spdlog::warn("cluster job {}: attempt {} failed ({}); retrying in {} ms", claim.job.id,
                 attempts, result.outcome.error().message, backoff.count());
    std::mutex sleep_mu;
    std::condition_variable_any sleep_cv;
    std::unique_lock sleep_lock(sleep_mu);
    sleep_cv.wait_for(sleep_lock, cancel, backoff, [] { return false; });
    if (cancel.stop_requested()) {
      break;
    }
    ++attempts;
    result = parts_.runner.run(spec, cancel);
  }
  return result;
}

void ClusterJobs::run(const RedisJobQueue::Claim& claim) {
  const std::string id = claim.job.id;
  std::stop_source cancel;
  {
    std::lock_guard lock(mu_);
    running_.emplace(id, Running{claim, cancel, false});
  }
  Job job = claim.job;
  job.spec_json.clear();
  const auto start = Clock::now();
  auto spec = compiler::spec_from_json(claim.job.spec_json);
  compiler::WorkerOutcome result{
      tl::unexpected(
          CompileError{CompileError::Code::kInvalidSpec, spec ? std::string() : spec.error(), {}}),
      {},
      compiler::WorkerExit::kCompileError};
  const bool worn_out = claim.job.attempts > jobs_.max_attempts;
  if (spec && !worn_out) {
    result = compile(claim, *spec, cancel.get_token());
    parts_.compile_seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
  }
  auto [lost, stopping] = end_run(id);
  const bool cancelled =
      !result.outcome && result.outcome.error().code == CompileError::Code::kCancelled;
  // A node stalled past the visibility timeout (SIGSTOP, a long GC-like pause)
  // learns here that another node holds the job: it publishes nothing.
  lost = lost || (result.outcome && queue_.renew(claim) == RedisJobQueue::Renewal::kLost);
  if (lost || (cancelled && stopping)) {
    // Another node holds it now, or it is left for one to reclaim.
    spdlog::warn("cluster job {}: {}", id,
                 lost ? "its claim was taken over; not publishing" : "left to the cluster");
    return;
  }
  job.compile_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (result.outcome) {
    parts_.ok.inc();
    JobPublisher::CompileMetadata meta{job.id, job.compile_key, job.backend, job.target, job.output,
                                       {},     job.submitter};
    const auto keyed = parts_.runner.toolchains().find(spec->backend);
    meta.toolchain =
        keyed != parts_.runner.toolchains().end() ? keyed->second.components() : result.toolchain;
    std::set<std::string> published;
    auto keys = [&] {
      auto now = queue_.keys(id);
      std::vector<std::string> out = now && !now->empty() ? std::move(*now) : job.keys;
      published.insert(out.begin(), out.end());
      return out;
    };
    // kc1- keys' manifests: the stream entry's (joining submissions' are not carried).
    auto ok = parts_.publisher.publish_compile(*result.outcome, meta, keys, job.manifests);
    std::string publish_error = ok ? std::string() : ok.error();
    if (ok) {
      // Submissions that joined after the last look at the keys.
      auto sealed = queue_.seal(claim);
      if (sealed && !*sealed) {
        spdlog::warn("cluster job {}: its claim was taken over; not marking it", id);
        return;
      }
      if (sealed) {
        std::vector<std::string> extra;
        for (const std::string& k : **sealed) {
          if (!published.contains(k)) {
            extra.push_back(k);
          }
        }
        if (!extra.empty()) {
          ok = parts_.publisher.publish_compile(
              *result.outcome, meta, [&] { return extra; }, job.manifests);
          publish_error = ok ? std::string() : ok.error();
        }
      }
      job.keys.assign(published.begin(), published.end());
    }
    job.output_size = result.outcome->binary.size();
    job.log = compiler::log_tail(result.outcome->log, kJobLogTail);
    if (publish_error.empty()) {
      job.state = JobState::kSucceeded;
    } else {
      job.state = JobState::kFailed;
      job.error_code = JobError::kStore;
      job.error_message = "the compile succeeded but storing it failed: " + publish_error;
    }
  } else if (worn_out) {
    parts_.failed.inc();
    job.state = JobState::kFailed;
    job.error_code = JobError::kInternal;
    job.error_message = "the job was claimed " + std::to_string(claim.job.attempts) +
                        " times (its nodes died or stalled) and is not retried";
  } else {
    const CompileError& e = result.outcome.error();
    (cancelled ? parts_.cancelled : parts_.failed).inc();
    const bool infrastructure = is_infrastructure_failure(result.exit);
    job.state = cancelled ? JobState::kCancelled : JobState::kFailed;
    job.error_code = infrastructure ? JobError::kInfrastructure : job_error_of(e.code);
    job.error_message = infrastructure
                            ? "the compile's worker failed (not the spec's fault): " + e.message
                            : e.message;
    job.log = compiler::log_tail(e.log, kJobLogTail);
  }
  job.finished_ms = protocol::unix_now_ms();
  auto written = queue_.finish(claim, job);
  if (!written) {
    // Unacked: a node reclaims it after the visibility timeout (its
    // publication is idempotent: the same key, the same bytes).
    spdlog::error("cluster job {}: writing its final state: {}", id, written.error().message);
  } else if (!*written) {
    spdlog::warn("cluster job {}: its claim was taken over; its state is the newer claim's", id);
  }
  spdlog::info("cluster job {} {} ({} {} {}) in {} ms{}{}", id, job_state_name(job.state),
               job.backend, job.entry, job.target, job.compile_ms,
               job.error_message.empty() ? "" : ": ", job.error_message);
  {
    std::lock_guard lock(mu_);
    poke_ = true;
  }
  cv_.notify_all();
}

void ClusterJobs::run_search(const RedisJobQueue::Claim& claim) {
  const std::string id = claim.job.id;
  std::stop_source cancel;
  {
    std::lock_guard lock(mu_);
    running_.emplace(id, Running{claim, cancel, false});
  }
  Job job;
  if (claim.job.attempts > jobs_.max_attempts || !parts_.autotune) {
    job = claim.job;
    job.spec_json.clear();
    job.state = JobState::kFailed;
    job.error_code = JobError::kInternal;
    job.error_message = parts_.autotune
                            ? "the search was claimed " + std::to_string(claim.job.attempts) +
                                  " times (its nodes died or stalled) and is not retried"
                            : "this kcached runs no autotune searches";
  } else {
    // Written as variants finish, so `jobs watch` on any node follows it;
    // fenced by the claim's token like every other write of the claim.
    std::size_t written_done = claim.job.progress_done;
    auto last_write = Clock::now() - kProgressEvery;
    const Parts::Progress progress = [&](std::size_t done, std::size_t total) {
      const auto now = Clock::now();
      if (done == written_done || now - last_write < kProgressEvery) {
        return;
      }
      last_write = now;
      if (auto ok = queue_.progress(claim, done, total); ok && *ok) {
        written_done = done;
      } else if (!ok) {
        spdlog::debug("cluster search {}: writing its progress: {}", id, ok.error().message);
      }
    };
    job = parts_.autotune(claim.job, cancel.get_token(), progress);
  }
  auto [lost, stopping] = end_run(id);
  const bool succeeded = job.state == JobState::kSucceeded;
  lost = lost || (succeeded && queue_.renew(claim) == RedisJobQueue::Renewal::kLost);
  // Unfinished: this node stops; the entry is left for another to reclaim.
  if (lost || !job.finished() || (job.state == JobState::kCancelled && stopping)) {
    spdlog::warn("cluster search {}: {}", id,
                 lost ? "its claim was taken over; not marking it" : "left to the cluster");
    return;
  }
  if (succeeded) {
    // The local search published under the keys its entry carried; keys of
    // submissions that joined since are linked to the same record.
    auto sealed = queue_.seal(claim);
    if (sealed && !*sealed) {
      spdlog::warn("cluster search {}: its claim was taken over; not marking it", id);
      return;
    }
    std::set<std::string> keys(job.keys.begin(), job.keys.end());
    for (const std::string& k : sealed ? **sealed : std::vector<std::string>()) {
      if (!keys.contains(k) && parts_.publisher.cached(k, job.compile_key)) {
        keys.insert(k);
      }
    }
    job.keys.assign(keys.begin(), keys.end());
  }
  job.finished_ms = protocol::unix_now_ms();
  auto written = queue_.finish(claim, job);
  if (!written) {
    spdlog::error("cluster search {}: writing its final state: {}", id, written.error().message);
  }
  spdlog::info("cluster search {} {} on tuning class {}{}{}", id, job_state_name(job.state),
               job.tuning_class, job.error_message.empty() ? "" : ": ", job.error_message);
  {
    std::lock_guard lock(mu_);
    poke_ = true;
  }
  cv_.notify_all();
}

ClusterJobs::RunEnd ClusterJobs::end_run(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto r = running_.find(id);
  RunEnd end{r->second.lost, stopping_};
  running_.erase(r);
  return end;
}

void ClusterJobs::heartbeat_loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    sleep(stop, cluster_.heartbeat);
    if (stop.stop_requested()) {
      return;
    }
    std::vector<RedisJobQueue::Claim> claims;
    std::set<std::string> entries;
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, r] : running_) {
        claims.push_back(r.claim);
        entries.insert(r.claim.entry);
      }
    }
    for (const RedisJobQueue::Claim& claim : claims) {
      const RedisJobQueue::Renewal renewal = queue_.renew(claim);
      if (renewal == RedisJobQueue::Renewal::kHeld) {
        continue;
      }
      std::lock_guard lock(mu_);
      if (const auto r = running_.find(claim.job.id); r != running_.end()) {
        r->second.lost = renewal == RedisJobQueue::Renewal::kLost;
        r->second.cancel.request_stop();
      }
    }
    if (auto reclaimed = queue_.reclaim(entries); reclaimed && *reclaimed > 0) {
      spdlog::info("cluster queue: reclaimed {} jobs of stalled or dead nodes", *reclaimed);
      reclaimed_.inc(*reclaimed);
    }
    (void)queue_.advertise(); // a Redis error: the next beat tries again
    if (auto depth = queue_.depth()) {
      depth_ = *depth;
    }
  }
}

void ClusterJobs::waiter_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested() && !stopping_) {
    cv_.wait_for(lock, stop, kPollEvery, [&] { return poke_ || stopping_; });
    poke_ = false;
    if (waiters_.empty() || stopping_) {
      continue;
    }
    std::vector<std::string> ids;
    for (const auto& [id, w] : waiters_) {
      ids.push_back(id);
    }
    lock.unlock();
    std::map<std::string, std::optional<Job>> seen; // absent: Redis did not answer
    for (const std::string& id : ids) {
      if (auto job = queue_.find(id)) {
        seen.emplace(id, std::move(*job));
      }
    }
    lock.lock();
    std::vector<std::pair<WaitCallback, JobLookup>> ready;
    const auto now = Clock::now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      Waiters& w = it->second;
      const auto s = seen.find(it->first);
      const bool gone = s != seen.end() && !s->second; // Redis answered: no such job
      if (s != seen.end() && s->second) {
        w.last = *s->second;
      }
      const bool done = gone || (w.last && w.last->finished());
      for (auto call = w.calls.begin(); call != w.calls.end();) {
        if (done || call->first <= now) {
          ready.emplace_back(std::move(call->second), gone ? JobLookup() : w.answer());
          call = w.calls.erase(call);
        } else {
          ++call;
        }
      }
      it = w.calls.empty() ? waiters_.erase(it) : std::next(it);
    }
    if (!ready.empty()) {
      lock.unlock();
      for (auto& [done, job] : ready) {
        done(std::move(job));
      }
      lock.lock();
    }
  }
}

} // namespace kcache::service
