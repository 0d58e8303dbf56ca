#include <kcache/cachekey/hardware.h>
#include <kcache/protocol/clock.h>
#include <kcache/protocol/json_text.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/job_queue_local.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

namespace {

std::string cpu_tuning_class(const JobsConfig& config) {
  return !config.tuning_class.empty()
             ? config.tuning_class
             : cachekey::hardware_class(cachekey::detect_cpu()).tuning_class;
}

std::string gpu_tuning_class(const JobsConfig& config) {
  if (!config.tuning_class.empty()) {
    return config.tuning_class;
  }
  const auto gpus = cachekey::detect_gpus();
  return gpus.empty() ? std::string() : cachekey::hardware_class(gpus.front()).tuning_class;
}

} // namespace

tl::expected<std::unique_ptr<JobManager>, std::string>
JobManager::create(const JobsConfig& config, const std::string& journal_dir, storage::Store& store,
                   MetricsRegistry& metrics, const storage::RecordSigner* signer) {
  auto runner = WorkerJobRunner::create(config);
  if (!runner) {
    return tl::unexpected(runner.error());
  }
  auto queue = LocalJobQueue::open(config.queue_capacity, journal_dir);
  if (!queue) {
    return tl::unexpected(queue.error());
  }
  return create(config, std::move(*runner), std::move(*queue), store, metrics, signer);
}

std::unique_ptr<JobManager> JobManager::create(const JobsConfig& config,
                                               std::unique_ptr<JobRunner> runner,
                                               std::unique_ptr<JobQueue> queue,
                                               storage::Store& store, MetricsRegistry& metrics,
                                               const storage::RecordSigner* signer) {
  auto manager = std::make_unique<JobManager>(PrivateTag{}, config, std::move(runner),
                                              std::move(queue), store, metrics, signer);
  manager->recover();
  JobManager* m = manager.get();
  {
    // Under the lock: a worker that finishes a job at once notifies the pool.
    std::lock_guard lock(m->mu_);
    m->pool_ = std::make_unique<JobWorkerPool>(
        config.workers, [m] { return m->take_next(); },
        [m](const std::string& id) { m->run_job(id); });
  }
  m->housekeeper_ = std::jthread([m](const std::stop_token& stop) { m->housekeeping_loop(stop); });
  return manager;
}

JobManager::Metrics::Metrics(MetricsRegistry& r)
    : registry(r),
      ok(r.counter("kcache_compiles_total", "Compiles run by workers", {{"result", "succeeded"}})),
      failed(r.counter("kcache_compiles_total", "Compiles run by workers", {{"result", "failed"}})),
      cancelled(
          r.counter("kcache_compiles_total", "Compiles run by workers", {{"result", "cancelled"}})),
      compile_seconds(r.histogram("kcache_compile_duration_seconds",
                                  "Wall time of one compile in a worker", {},
                                  {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300})),
      queue_seconds(r.histogram("kcache_job_queue_seconds", "Time a job waited for a worker", {},
                                {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60, 300})) {}

JobManager::JobManager(PrivateTag, const JobsConfig& config, std::unique_ptr<JobRunner> runner,
                       std::unique_ptr<JobQueue> queue, storage::Store& store,
                       MetricsRegistry& metrics, const storage::RecordSigner* signer)
    : config_(config), runner_(std::move(runner)), intake_(*runner_, config.max_spec_bytes),
      host_tuning_class_(cpu_tuning_class(config)),
      host_gpu_tuning_class_(gpu_tuning_class(config)), publisher_(store, signer),
      metrics_(metrics), queue_(std::move(queue)),
      table_(config.history,
             std::chrono::duration_cast<std::chrono::milliseconds>(config.negative_ttl)) {
  metrics.describe("kcache_jobs", "gauge", "Jobs by state");
  metrics.add_collector([this](std::vector<MetricsRegistry::Sample>& out) {
    const JobCounts c = counts();
    out.push_back({"kcache_jobs", {{"state", "queued"}}, static_cast<double>(c.queued)});
    out.push_back({"kcache_jobs", {{"state", "running"}}, static_cast<double>(c.running)});
  });
}

JobManager::~JobManager() {
  shutdown();
}

void JobManager::recover() {
  std::vector<Job> jobs = queue_->load();
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.submitted_ms < b.submitted_ms; });
  std::size_t resumed = 0;
  std::vector<std::string> searches; // autotune jobs restart from their search
  for (Job& job : jobs) {
    if (job.spec_digest.empty()) { // a record from before digests were journaled
      job.spec_digest = JobIntake::spec_digest(job.spec_json);
    }
  }
  std::unique_lock lock(mu_);
  for (Job& job : jobs) {
    if (!is_finished(job.state)) {
      if (job.attempts >= config_.max_attempts) {
        // It was running when the daemon died, this many times: stop trying.
        job.state = JobState::kFailed;
        job.error_code = JobError::kInternal;
        job.error_message = "the job was interrupted " + std::to_string(job.attempts) +
                            " times (daemon restarts) and is not retried";
        job.finished_ms = protocol::unix_now_ms();
        journal_locked(job);
      } else {
        job.state = JobState::kQueued;
        if (job.kind == JobKind::kAutotune) {
          searches.push_back(job.id);
        } else {
          queue_->push(job.id, job.priority, /*force=*/true);
        }
        ++resumed;
      }
    }
    for (const std::string& evicted :
         table_.restore(std::move(job), protocol::unix_now_ms(), Clock::now())) {
      if (auto ok = queue_->erase(evicted); !ok) {
        spdlog::warn("{}", ok.error());
      }
    }
  }
  lock.unlock();
  for (const std::string& id : searches) {
    begin_autotune(id); // compiled variants are cache hits now: only the rest compile
  }
  if (!jobs.empty()) {
    spdlog::info("job journal: {} jobs read, {} resumed", jobs.size(), resumed);
  }
}

std::optional<SubmitResult> JobManager::lookup_cached(const std::string& key,
                                                      const std::string& compile_key,
                                                      const std::string& manifest_json) {
  if (auto why = publisher_.cached(key, compile_key, manifest_json)) {
    return SubmitResult{SubmitStatus::kCached, std::nullopt, std::move(*why)};
  }
  return std::nullopt;
}

SubmitResult JobManager::submit(const Submission& submission) {
  SubmitResult result = submit_uncounted(submission);
  metrics_.registry
      .counter("kcache_job_submissions_total", "Job submissions by outcome",
               {{"status", std::string(submit_status_name(result.status))}})
      .inc();
  return result;
}

SubmitResult JobManager::submit_uncounted(const Submission& submission) {
  if (auto refused = intake_.too_long(submission.spec_json)) {
    return std::move(*refused); // before parsing it
  }
  const nlohmann::json doc = protocol::parse_json_or_discarded(submission.spec_json);
  if (doc.is_object() && doc.contains("autotune")) {
    return submit_autotune(submission);
  }
  auto compile = intake_.compile(submission);
  if (!compile) {
    return std::move(compile.error());
  }
  const auto manifest = compile->job.manifests.find(compile->key);
  if (auto cached =
          lookup_cached(compile->key, compile->job.compile_key,
                        manifest == compile->job.manifests.end() ? "" : manifest->second)) {
    return std::move(*cached);
  }
  if (cluster_) {
    bool local = false; // one queued here while Redis was down: join it here
    {
      std::lock_guard lock(mu_);
      local = table_.active(compile->job.compile_key) != nullptr || stopping_;
    }
    if (!local) {
      if (auto queued = cluster_->submit(compile->job, compile->key)) {
        return std::move(*queued);
      }
    }
  }
  std::lock_guard lock(mu_);
  return admit_locked(std::move(compile->job), compile->key, /*queue_now=*/true, /*force=*/false);
}

SubmitResult JobManager::admit_locked(Job job, const std::string& key, bool queue_now, bool force,
                                      std::size_t children) {
  if (stopping_) {
    return {SubmitStatus::kUnavailable, std::nullopt, "kcached is shutting down"};
  }
  if (const Job* previous = table_.failed_recently(job, Clock::now())) {
    return {SubmitStatus::kFailedRecently, *previous,
            "this compile failed recently: " + previous->error_message};
  }
  if (Job* existing = table_.active(job.compile_key)) {
    if (JobTable::join(*existing, key, job.parents, job.priority) && queue_->remove(existing->id)) {
      queue_->push(existing->id, existing->priority, /*force=*/true);
    }
    // A joining kc1- key's manifest: its record is stored with it too.
    existing->manifests.insert(job.manifests.begin(), job.manifests.end());
    journal_locked(*existing);
    return {SubmitStatus::kJoined, *existing, "joined the job already working on this"};
  }
  if (!force) {
    const std::size_t adds = 1 + children;
    const std::size_t quota = config_.max_jobs_per_submitter;
    if (adds > queue_->capacity() || (quota > 0 && adds > quota)) {
      // Never fits: waiting would not help.
      return {SubmitStatus::kInvalid, std::nullopt,
              "this submission adds " + std::to_string(adds) +
                  " jobs (its autotune variants and reference included), more than " +
                  (adds > queue_->capacity()
                       ? "the compile queue holds (queue_capacity " +
                             std::to_string(queue_->capacity()) + ")"
                       : "one submitter may have queued or running (max_jobs_per_submitter " +
                             std::to_string(quota) + ")")};
    }
    if (queue_->size() + reserved_ + adds > queue_->capacity()) {
      return {SubmitStatus::kBusy, std::nullopt,
              "the compile queue is full (" + std::to_string(queue_->capacity()) +
                  " jobs; this submission adds " + std::to_string(adds) + ")"};
    }
    if (quota > 0 && table_.active_jobs(job.submitter) + adds > quota) {
      return {SubmitStatus::kBusy, std::nullopt,
              "this submitter has " + std::to_string(table_.active_jobs(job.submitter)) +
                  " jobs queued or running; max_jobs_per_submitter is " + std::to_string(quota) +
                  " (this submission adds " + std::to_string(adds) + ")"};
    }
  }
  if (key != job.compile_key) {
    job.keys.push_back(key);
  }
  if (auto ok = queue_->put(job); !ok) {
    return {SubmitStatus::kStoreError, std::nullopt, ok.error()};
  }
  changed_locked();
  const Job& stored = table_.add(std::move(job));
  if (children > 0) {
    reservations_[stored.id] = children;
    reserved_ += children;
  }
  if (queue_now) {
    queue_->push(stored.id, stored.priority, force);
    if (pool_) {
      pool_->notify();
    }
  }
  return {SubmitStatus::kQueued, stored, "queued"};
}

void JobManager::enqueue_locked(const Job& job) {
  queue_->push(job.id, job.priority, /*force=*/true);
  if (pool_) {
    pool_->notify();
  }
}

JobLookup JobManager::find(const std::string& id) const {
  {
    std::lock_guard lock(mu_);
    if (const Job* job = table_.find(id)) {
      return *job;
    }
  }
  return cluster_ ? cluster_->find(id) : JobLookup();
}

void JobManager::enable_cluster(const ClusterConfig& cluster, const storage::RedisOptions& redis) {
  ClusterJobs::Parts parts{
      *runner_,
      publisher_,
      metrics_.ok,
      metrics_.failed,
      metrics_.cancelled,
      metrics_.compile_seconds,
      {cachekey::detect_cpu().arch, host_tuning_class_, host_gpu_tuning_class_},
      [this](const Job& search, const std::stop_token& cancel,
             const ClusterJobs::Parts::Progress& progress) {
        return run_cluster_search(search, cancel, progress);
      }};
  cluster_ =
      std::make_unique<ClusterJobs>(config_, cluster, redis, std::move(parts), metrics_.registry);
}

std::optional<std::size_t> JobManager::queue_position(const std::string& id) const {
  std::lock_guard lock(mu_);
  return queue_->position(id);
}

void JobManager::wait(const std::string& id, Clock::time_point deadline,
                      std::function<void(JobLookup)> done) {
  std::optional<Job> now;
  bool cluster = false;
  {
    std::lock_guard lock(mu_);
    const Job* job = table_.find(id);
    // Stopping, the cluster still answers with the job as it is (or 503).
    cluster = job == nullptr && cluster_;
    if (job != nullptr && !is_finished(job->state) && !stopping_ && deadline > Clock::now()) {
      waiters_.add(id, deadline, std::move(done));
      ++waiters_generation_;
      waiter_cv_.notify_all(); // the housekeeper may need to wake earlier
      return;
    }
    if (job != nullptr) {
      now = *job;
    }
  }
  if (cluster) {
    cluster_->wait(id, deadline, std::move(done)); // not ours: the cluster's, if any
    return;
  }
  done(std::move(now));
}

std::uint64_t JobManager::changes() const {
  std::lock_guard lock(mu_);
  return changes_;
}

void JobManager::wait_for_change(std::uint64_t seen, Clock::time_point deadline,
                                 std::function<void()> done) {
  if (cluster_) {
    deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
  }
  {
    std::lock_guard lock(mu_);
    if (seen == changes_ && !stopping_ && deadline > Clock::now()) {
      change_waiters_.add(std::to_string(seen), deadline, std::move(done));
      ++waiters_generation_;
      waiter_cv_.notify_all(); // the housekeeper may need to wake earlier
      return;
    }
  }
  done();
}

JobLookup JobManager::cancel(const std::string& id) {
  if (cluster_) {
    bool local = false;
    {
      std::lock_guard lock(mu_);
      local = table_.find(id) != nullptr;
    }
    if (!local) {
      return cluster_->cancel(id); // not ours: the cluster's, if any
    }
  }
  Callbacks callbacks;
  std::optional<Job> result;
  {
    std::lock_guard lock(mu_);
    Job* job = table_.find(id);
    if (job == nullptr) {
      return JobLookup(); // no such job
    }
    std::optional<Finished> finished;
    if (job->kind == JobKind::kAutotune && !is_finished(job->state) && !running_.contains(id)) {
      // Compiling its variants, or waiting for a worker to benchmark them.
      queue_->remove(id);
      autotune_.erase(id);
      job->error_code = JobError::kCancelled;
      job->error_message = "cancelled before its benchmark ran";
      finished = finish_locked(*job, JobState::kCancelled);
    } else if (job->state == JobState::kQueued && queue_->remove(id)) {
      job->error_code = JobError::kCancelled;
      job->error_message = "cancelled before it ran";
      finished = finish_locked(*job, JobState::kCancelled);
    } else if (job->state == JobState::kRunning) {
      if (const auto r = running_.find(id); r != running_.end()) {
        r->second.request_stop(); // the worker thread finishes it as cancelled
      }
    }
    if (finished) {
      result = std::move(finished->job);
      callbacks = std::move(finished->callbacks);
    } else {
      result = *job;
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  return result;
}

std::vector<Job> JobManager::list(std::optional<JobState> state, std::size_t limit) const {
  std::vector<Job> jobs;
  {
    std::lock_guard lock(mu_);
    jobs = table_.list(state, limit);
  }
  if (cluster_) {
    // Newest first across both: the cluster's jobs, and ours queued while Redis was down.
    for (Job& job : cluster_->list(state, limit)) {
      if (std::none_of(jobs.begin(), jobs.end(), [&](const Job& j) { return j.id == job.id; })) {
        jobs.push_back(std::move(job));
      }
    }
    // A total order (ids break ties) instead of stable_sort, whose libstdc++
    // buffer helper is deprecated under clang's C++20 (the fuzz build).
    std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
      return a.submitted_ms != b.submitted_ms ? a.submitted_ms > b.submitted_ms : a.id < b.id;
    });
    if (jobs.size() > limit) {
      jobs.resize(limit);
    }
  }
  return jobs;
}

JobCounts JobManager::counts() const {
  const std::size_t cluster_running = cluster_ ? cluster_->running() : 0;
  std::lock_guard lock(mu_);
  return JobCounts{queue_->size(), running_.size() + cluster_running, table_.finished(),
                   config_.workers, queue_->capacity()};
}

void JobManager::shutdown() {
  Callbacks callbacks;
  std::vector<std::function<void()>> listings;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    stopping_ = true;
    for (auto& [id, stop] : running_) {
      stop.request_stop();
    }
    waiters_.take_all([&](const std::string& id, WaitCallback&& done) {
      callbacks.emplace_back(std::move(done), *table_.find(id));
    });
    change_waiters_.take_all([&](const std::string& /*seen*/, std::function<void()>&& done) {
      listings.push_back(std::move(done));
    });
  }
  waiter_cv_.notify_all();
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  for (auto& done : listings) {
    done();
  }
  if (cluster_) {
    cluster_->stop();
  }
  if (pool_) {
    pool_->stop();
  }
  housekeeper_.request_stop();
  if (housekeeper_.joinable()) {
    housekeeper_.join();
  }
}

JobManager::Finished JobManager::finish_locked(Job& job, JobState state) {
  JobTable::Finished finished = table_.finish(job, state, protocol::unix_now_ms(), Clock::now());
  const Job& done = finished.job; // `job` may be gone (history 0)
  journal_locked(done);
  const AutotuneCoordinator::Touched touched = autotune_.on_child_finished(done, table_);
  for (const std::string& parent : touched.parents) {
    const Job& search = *table_.find(parent);
    if (std::find(touched.ready.begin(), touched.ready.end(), parent) != touched.ready.end()) {
      enqueue_locked(search); // its last variant compiled: benchmark it
    }
    journal_locked(search);
  }
  for (const std::string& evicted : finished.evicted) {
    if (auto ok = queue_->erase(evicted); !ok) {
      spdlog::warn("{}", ok.error());
    }
  }
  Finished out{std::move(finished.job), {}};
  waiters_.take(out.job.id, [&](const std::string& /*id*/, WaitCallback&& callback) {
    out.callbacks.emplace_back(std::move(callback), out.job);
  });
  spdlog::info("job {} {} ({} {} {}) in {} ms{}{}", out.job.id, job_state_name(state),
               out.job.backend, out.job.entry, out.job.target, out.job.compile_ms,
               out.job.error_message.empty() ? "" : ": ", out.job.error_message);
  return out;
}

void JobManager::journal_locked(const Job& job) {
  if (auto ok = queue_->put(job); !ok) {
    // The job goes on; only its survival across a restart is at risk.
    spdlog::error("job {}: {}", job.id, ok.error());
  }
  changed_locked();
}

void JobManager::changed_locked() {
  ++changes_;
  if (!change_waiters_.empty()) {
    ++waiters_generation_; // the housekeeper answers them, outside the lock
    waiter_cv_.notify_all();
  }
}

void JobManager::housekeeping_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested() && !stopping_) {
    const auto next =
        change_waiters_.earliest(waiters_.earliest(Clock::now() + std::chrono::seconds(1)));
    const std::uint64_t generation = waiters_generation_;
    waiter_cv_.wait_until(lock, stop, next,
                          [&] { return stopping_ || waiters_generation_ != generation; });
    const auto now = Clock::now();
    Callbacks expired;
    waiters_.take_expired(now, [&](const std::string& id, WaitCallback&& done) {
      expired.emplace_back(std::move(done), *table_.find(id));
    });
    // Listings that saw an older count, and those whose wait ended.
    std::vector<std::function<void()>> listings;
    const std::string current = std::to_string(changes_);
    const auto take = [&](const std::string& /*seen*/, std::function<void()>&& done) {
      listings.push_back(std::move(done));
    };
    change_waiters_.take_if([&](const std::string& seen) { return seen != current; }, take);
    change_waiters_.take_expired(now, take);
    table_.expire_failures(now);
    if (!expired.empty() || !listings.empty()) {
      lock.unlock();
      for (auto& [done, job] : expired) {
        done(std::move(job));
      }
      for (auto& done : listings) {
        done();
      }
      lock.lock();
    }
  }
}

} // namespace kcache::service
