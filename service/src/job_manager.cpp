#include <kcache/cachekey/hardware.h>
#include <kcache/cachekey/json_text.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/cachekey/wire.h>
#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/spec_check.h>
#include <kcache/service/job_manager.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>

namespace kcache::service {

using compiler::CompileError;

namespace {

constexpr std::array<std::string_view, 8> kSubmitStatusNames = {
    "queued", "joined",  "cached",      "failed-recently",
    "busy",   "invalid", "unavailable", "store-error"};

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string file_name_for(compiler::OutputKind kind) {
  switch (kind) {
  case compiler::OutputKind::kCubin:
    return "kernel.cubin";
  case compiler::OutputKind::kPtx:
    return "kernel.ptx";
  case compiler::OutputKind::kObject:
    return "kernel.o";
  case compiler::OutputKind::kSharedObject:
    return "kernel.so";
  }
  return "kernel.bin";
}

// Cut at a line or character boundary: the log stays valid UTF-8.
std::string tail(const std::string& s, std::size_t n = 8000) {
  return compiler::log_tail(s, n);
}

// Failures of the compile itself are remembered; failures of the machinery
// (no toolchain, an internal error, a cancel) are not, nor are resource
// limits ("resource-limit"): a compile killed for memory or time may pass on
// a quieter node or with higher limits, and says nothing about its source.
bool is_cacheable_failure(const std::string& code) {
  return code == "compile-failed" || code == "invalid-spec";
}

// A failure is remembered under every byte of its spec, not its compile key:
// the key leaves out diagnostics flags, and "-Werror" can fail a spec that
// compiles without it.
std::string failure_key(const Job& job) {
  return job.compile_key + "/" + job.spec_digest;
}

// Hashed once per job, outside the manager's lock: a spec may be large.
std::string spec_digest(const std::string& spec_json) {
  return cachekey::to_hex(cachekey::Sha256::of(spec_json));
}

std::string hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

} // namespace

std::string_view submit_status_name(SubmitStatus status) {
  return kSubmitStatusNames[static_cast<std::size_t>(status)];
}

tl::expected<std::unique_ptr<JobManager>, std::string>
JobManager::create(const JobsConfig& config, const std::string& journal_dir, storage::Store& store,
                   MetricsRegistry& metrics) {
  compiler::WorkerRunner runner(
      config.worker_binary,
      compiler::WorkerLimits{
          std::chrono::duration_cast<std::chrono::milliseconds>(config.wall_clock), config.cpu_time,
          config.memory_bytes});
  auto toolchains = runner.toolchains();
  if (!toolchains) {
    return tl::unexpected("kcache-worker: " + toolchains.error());
  }
  if (auto sandbox = runner.sandbox()) {
    spdlog::info("kcache-worker: compiles confined by {}", *sandbox);
  } else {
    spdlog::warn("kcache-worker: compiles run unconfined ({}); the spec checks still refuse host "
                 "paths",
                 sandbox.error());
  }
  // Without it only target "native" is refused; every other spec works.
  std::optional<compiler::HostTarget> host_target;
  if (auto host = runner.host_target()) {
    host_target = std::move(*host);
  } else {
    spdlog::warn("kcache-worker: {}; target 'native' will be refused", host.error());
  }
  std::error_code ec;
  std::filesystem::create_directories(journal_dir, ec);
  auto journal = JobJournal::open(journal_dir);
  if (!journal) {
    return tl::unexpected(journal.error());
  }
  auto manager =
      std::make_unique<JobManager>(PrivateTag{}, config, std::move(runner), std::move(*toolchains),
                                   std::move(host_target), std::move(*journal), store, metrics);
  manager->recover();
  for (unsigned i = 0; i < config.workers; ++i) {
    manager->workers_.emplace_back(
        [m = manager.get()](const std::stop_token& stop) { m->worker_loop(stop); });
  }
  manager->housekeeper_ = std::jthread(
      [m = manager.get()](const std::stop_token& stop) { m->housekeeping_loop(stop); });
  return manager;
}

JobManager::JobManager(PrivateTag, const JobsConfig& config, compiler::WorkerRunner runner,
                       compiler::Toolchains toolchains,
                       std::optional<compiler::HostTarget> host_target,
                       std::unique_ptr<JobJournal> journal, storage::Store& store,
                       MetricsRegistry& metrics)
    : config_(config), runner_(std::move(runner)), toolchains_(std::move(toolchains)),
      host_target_(std::move(host_target)),
      host_tuning_class_(!config.tuning_class.empty()
                             ? config.tuning_class
                             : cachekey::hardware_class(cachekey::detect_cpu()).tuning_class),
      host_gpu_tuning_class_([&config] {
        if (!config.tuning_class.empty()) {
          return config.tuning_class;
        }
        const auto gpus = cachekey::detect_gpus();
        return gpus.empty() ? std::string() : cachekey::hardware_class(gpus.front()).tuning_class;
      }()),
      journal_(std::move(journal)), artifacts_(store), queue_(config.queue_capacity),
      compiles_ok_(metrics.counter("kcache_compiles_total", "Compiles run by workers",
                                   {{"result", "succeeded"}})),
      compiles_failed_(metrics.counter("kcache_compiles_total", "Compiles run by workers",
                                       {{"result", "failed"}})),
      compiles_cancelled_(metrics.counter("kcache_compiles_total", "Compiles run by workers",
                                          {{"result", "cancelled"}})),
      compile_seconds_(metrics.histogram("kcache_compile_duration_seconds",
                                         "Wall time of one compile in a worker", {},
                                         {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300})),
      queue_seconds_(metrics.histogram("kcache_job_queue_seconds", "Time a job waited for a worker",
                                       {}, {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60, 300})),
      metrics_(metrics) {
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
  std::vector<Job> jobs = journal_->load();
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.submitted_ms < b.submitted_ms; });
  std::size_t resumed = 0;
  std::vector<std::string> searches; // autotune jobs restart from their search
  for (Job& job : jobs) {
    job.spec_digest = spec_digest(job.spec_json);
  }
  std::unique_lock lock(mu_);
  for (Job& job : jobs) {
    if (!is_finished(job.state)) {
      if (job.attempts >= config_.max_attempts) {
        // It was running when the daemon died, this many times: stop trying.
        job.state = JobState::kFailed;
        job.error_code = "internal";
        job.error_message = "the job was interrupted " + std::to_string(job.attempts) +
                            " times (daemon restarts) and is not retried";
        job.finished_ms = now_ms();
        journal_locked(job);
      } else {
        job.state = JobState::kQueued;
        if (job.kind == "autotune") {
          searches.push_back(job.id);
        } else {
          queue_.push(job.id, job.priority, /*force=*/true);
        }
        active_by_key_[job.compile_key] = job.id;
        ++resumed;
      }
    }
    const std::string id = job.id;
    jobs_[id] = std::move(job);
    if (is_finished(jobs_[id].state)) {
      remember_finished_locked(jobs_[id]);
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
                                                      const std::string& compile_key) {
  auto record = artifacts_.get_record(key);
  if (record && *record) {
    return SubmitResult{SubmitStatus::kCached, std::nullopt, "already in the cache"};
  }
  if (key == compile_key) {
    return std::nullopt;
  }
  // The same compile, asked for under another client key: link, do not rebuild.
  auto artifact = artifacts_.get(compile_key);
  if (!artifact || !*artifact) {
    return std::nullopt;
  }
  storage::ActionRecord copy = (*artifact)->record;
  copy.key = key;
  copy.manifest.reset();
  if (auto stored = artifacts_.put(std::move(copy), std::move((*artifact)->files)); !stored) {
    return std::nullopt;
  }
  return SubmitResult{SubmitStatus::kCached, std::nullopt, "compiled before under another key"};
}

SubmitResult JobManager::submit(const Submission& submission) {
  SubmitResult result = submit_uncounted(submission);
  metrics_
      .counter("kcache_job_submissions_total", "Job submissions by outcome",
               {{"status", std::string(submit_status_name(result.status))}})
      .inc();
  return result;
}

SubmitResult JobManager::submit_uncounted(const Submission& submission) {
  const nlohmann::json doc = nlohmann::json::parse(submission.spec_json, nullptr, false);
  if (doc.is_object() && doc.contains("autotune")) {
    return submit_autotune(submission);
  }
  auto spec = compiler::spec_from_json(submission.spec_json);
  if (!spec) {
    return {SubmitStatus::kInvalid, std::nullopt, spec.error()};
  }
  auto prepared = prepare(*spec);
  if (!prepared) {
    return std::move(prepared.error());
  }
  auto compile_key = compile_key_of(*prepared);
  if (!compile_key) {
    return {SubmitStatus::kUnavailable, std::nullopt, compile_key.error()};
  }
  const std::string key = submission.key.empty() ? *compile_key : submission.key;
  if (!cachekey::wire::is_valid_action_key(key)) {
    return {SubmitStatus::kInvalid, std::nullopt, "invalid key '" + key + "'"};
  }
  if (auto cached = lookup_cached(key, *compile_key)) {
    return std::move(*cached);
  }
  // The job keeps the prepared spec: the worker compiles what the key names.
  Job job =
      compile_job(*prepared, *compile_key, compiler::spec_to_json(*prepared), submission.priority);
  std::lock_guard lock(mu_);
  return admit_locked(std::move(job), key, /*queue_now=*/true, /*force=*/false);
}

tl::expected<compiler::CompileSpec, SubmitResult>
JobManager::prepare(compiler::CompileSpec spec) const {
  const auto toolchain = toolchains_.find(spec.backend);
  if (toolchain == toolchains_.end()) {
    return tl::unexpected(SubmitResult{SubmitStatus::kUnavailable, std::nullopt,
                                       "the " + std::string(compiler::backend_name(spec.backend)) +
                                           " backend is not built into " + runner_.binary()});
  }
  // "native" is this host's CPU: keyed by its name and features as the
  // worker's LLVM sees them, so no other host's build answers for it.
  if (spec.target == "native" &&
      (spec.backend == compiler::Backend::kCpp || spec.backend == compiler::Backend::kLlvmIr)) {
    if (!host_target_) {
      return tl::unexpected(SubmitResult{SubmitStatus::kInvalid, std::nullopt,
                                         "target 'native': this kcached could not read its "
                                         "host's CPU from kcache-worker; name a CPU instead"});
    }
    spec.target = host_target_->cpu;
    if (!host_target_->features.empty()) {
      spec.options.push_back("-mattr=" + host_target_->features);
    }
  }
  auto prepared = compiler::prepare_spec(spec, &toolchain->second);
  if (!prepared) {
    return tl::unexpected(SubmitResult{SubmitStatus::kInvalid, std::nullopt, prepared.error()});
  }
  return std::move(*prepared);
}

tl::expected<std::string, std::string>
JobManager::compile_key_of(const compiler::CompileSpec& spec) const {
  const auto toolchain = toolchains_.find(spec.backend);
  if (toolchain == toolchains_.end()) {
    return tl::unexpected("the " + std::string(compiler::backend_name(spec.backend)) +
                          " backend is not built into " + runner_.binary());
  }
  return "kcc-" + cachekey::to_hex(compiler::compile_key(spec, toolchain->second));
}

Job JobManager::compile_job(const compiler::CompileSpec& spec, const std::string& compile_key,
                            std::string spec_json, int priority) {
  Job job;
  job.id = new_job_id();
  job.compile_key = compile_key;
  job.keys = {compile_key};
  job.spec_json = std::move(spec_json);
  job.spec_digest = spec_digest(job.spec_json);
  job.backend = compiler::backend_name(spec.backend);
  job.target = spec.target;
  job.entry = spec.name_expressions.empty() ? spec.source.name : spec.name_expressions.front();
  job.output = compiler::output_name(spec.output);
  job.priority = priority;
  job.submitted_ms = now_ms();
  return job;
}

SubmitResult JobManager::admit_locked(Job job, const std::string& key, bool queue_now, bool force) {
  if (stopping_) {
    return {SubmitStatus::kUnavailable, std::nullopt, "kcached is shutting down"};
  }
  if (const auto failed = failures_.find(failure_key(job)); failed != failures_.end()) {
    if (failed->second.expires > Clock::now()) {
      if (const auto previous = jobs_.find(failed->second.job_id); previous != jobs_.end()) {
        return {SubmitStatus::kFailedRecently, previous->second,
                "this compile failed recently: " + previous->second.error_message};
      }
    }
    failures_.erase(failed);
  }
  if (const auto active = active_by_key_.find(job.compile_key); active != active_by_key_.end()) {
    Job& existing = jobs_.at(active->second);
    ++existing.submissions;
    if (std::find(existing.keys.begin(), existing.keys.end(), key) == existing.keys.end()) {
      existing.keys.push_back(key);
    }
    for (const std::string& parent : job.parents) {
      existing.parents.push_back(parent);
    }
    if (job.priority > existing.priority) {
      existing.priority = job.priority;
      if (queue_.remove(existing.id)) {
        queue_.push(existing.id, existing.priority, /*force=*/true);
      }
    }
    journal_locked(existing);
    return {SubmitStatus::kJoined, existing, "joined the job already working on this"};
  }
  if (!force && queue_.size() >= queue_.capacity()) {
    return {SubmitStatus::kBusy, std::nullopt,
            "the compile queue is full (" + std::to_string(queue_.capacity()) + " jobs)"};
  }
  if (key != job.compile_key) {
    job.keys.push_back(key);
  }
  if (auto ok = journal_->put(job); !ok) {
    return {SubmitStatus::kStoreError, std::nullopt, ok.error()};
  }
  if (queue_now) {
    queue_.push(job.id, job.priority, force);
    work_cv_.notify_one();
  }
  active_by_key_[job.compile_key] = job.id;
  const std::string id = job.id;
  const Job& stored = jobs_[id] = std::move(job);
  return {SubmitStatus::kQueued, stored, "queued"};
}

std::optional<Job> JobManager::find(const std::string& id) const {
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(id);
  return it == jobs_.end() ? std::nullopt : std::optional<Job>(it->second);
}

std::optional<std::size_t> JobManager::queue_position(const std::string& id) const {
  std::lock_guard lock(mu_);
  return queue_.position(id);
}

void JobManager::wait(const std::string& id, Clock::time_point deadline,
                      std::function<void(std::optional<Job>)> done) {
  std::optional<Job> now;
  {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it != jobs_.end() && !is_finished(it->second.state) && !stopping_ &&
        deadline > Clock::now()) {
      waiters_.add(id, deadline, std::move(done));
      ++waiters_generation_;
      waiter_cv_.notify_all(); // the housekeeper may need to wake earlier
      return;
    }
    if (it != jobs_.end()) {
      now = it->second;
    }
  }
  done(std::move(now));
}

std::optional<Job> JobManager::cancel(const std::string& id) {
  Callbacks callbacks;
  std::optional<Job> result;
  {
    std::lock_guard lock(mu_);
    const auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      return std::nullopt;
    }
    Job& job = it->second;
    if (job.kind == "autotune" && !is_finished(job.state) && !running_.contains(id)) {
      // Compiling its variants, or waiting for a worker to benchmark them.
      queue_.remove(id);
      autotunes_.erase(id);
      job.error_code = "cancelled";
      job.error_message = "cancelled before its benchmark ran";
      callbacks = finish_locked(job, JobState::kCancelled);
    } else if (job.state == JobState::kQueued && queue_.remove(id)) {
      job.error_code = "cancelled";
      job.error_message = "cancelled before it ran";
      callbacks = finish_locked(job, JobState::kCancelled);
    } else if (job.state == JobState::kRunning) {
      if (const auto r = running_.find(id); r != running_.end()) {
        r->second.request_stop(); // the worker thread finishes it as cancelled
      }
    }
    result = job;
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  return result;
}

std::vector<Job> JobManager::list(std::optional<JobState> state, std::size_t limit) const {
  std::vector<Job> out;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, job] : jobs_) {
      if (!state || job.state == *state) {
        out.push_back(job);
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Job& a, const Job& b) {
    return a.submitted_ms != b.submitted_ms ? a.submitted_ms > b.submitted_ms : a.id < b.id;
  });
  if (out.size() > limit) {
    out.resize(limit);
  }
  return out;
}

JobCounts JobManager::counts() const {
  std::lock_guard lock(mu_);
  return JobCounts{queue_.size(), running_count_, finished_order_.size(), workers_.size(),
                   queue_.capacity()};
}

void JobManager::shutdown() {
  Callbacks callbacks;
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
      callbacks.emplace_back(std::move(done), jobs_.at(id));
    });
  }
  work_cv_.notify_all();
  waiter_cv_.notify_all();
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  for (std::jthread& t : workers_) {
    t.request_stop();
    t.join();
  }
  housekeeper_.request_stop();
  if (housekeeper_.joinable()) {
    housekeeper_.join();
  }
}

void JobManager::worker_loop(const std::stop_token& stop) {
  while (true) {
    std::string id;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, stop, [this] { return stopping_ || queue_.size() > 0; });
      if (stopping_ || stop.stop_requested()) {
        return;
      }
      id = *queue_.pop();
    }
    run_job(id);
  }
}

void JobManager::run_job(const std::string& id) {
  std::string spec_json;
  std::stop_source cancel;
  bool autotune = false;
  {
    std::lock_guard lock(mu_);
    Job& job = jobs_.at(id);
    autotune = job.kind == "autotune";
    if (autotune) {
      if (is_finished(job.state) || !autotunes_.contains(id)) {
        return; // cancelled between leaving the queue and reaching this thread
      }
      ++running_count_;
      running_.emplace(id, cancel);
    }
  }
  if (autotune) {
    run_autotune(id, cancel.get_token());
    return;
  }
  {
    std::lock_guard lock(mu_);
    Job& job = jobs_.at(id);
    job.state = JobState::kRunning;
    job.started_ms = now_ms();
    ++job.attempts;
    ++running_count_;
    journal_locked(job);
    running_.emplace(id, cancel);
    spec_json = job.spec_json;
    queue_seconds_.observe(static_cast<double>(job.started_ms - job.submitted_ms) / 1000.0);
  }
  const auto start = Clock::now();
  auto spec = compiler::spec_from_json(spec_json);
  compiler::WorkerOutcome result =
      spec ? runner_.run(*spec, cancel.get_token())
           : compiler::WorkerOutcome{
                 tl::unexpected(CompileError{CompileError::Code::kInvalidSpec, spec.error(), {}}),
                 {}};
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  compile_seconds_.observe(seconds);

  if (result.outcome) {
    // The record names the toolchain the key was computed with.
    const auto keyed = toolchains_.find(spec->backend);
    publish(id, *result.outcome,
            keyed != toolchains_.end() ? keyed->second.components() : result.toolchain);
    compiles_ok_.inc();
  } else if (result.outcome.error().code == CompileError::Code::kCancelled) {
    compiles_cancelled_.inc();
  } else {
    compiles_failed_.inc();
  }

  Callbacks callbacks;
  {
    std::lock_guard lock(mu_);
    --running_count_;
    running_.erase(id);
    Job& job = jobs_.at(id);
    job.compile_ms = static_cast<std::int64_t>(seconds * 1000);
    if (result.outcome) {
      job.output_size = result.outcome->binary.size();
      job.log = tail(result.outcome->log);
      if (job.error_code.empty()) {
        callbacks = finish_locked(job, JobState::kSucceeded);
      } else {
        callbacks = finish_locked(job, JobState::kFailed); // publishing failed
      }
    } else if (result.outcome.error().code == CompileError::Code::kCancelled && stopping_) {
      // Shutdown, not the user: the journal keeps it queued for the restart.
      job.state = JobState::kQueued;
      journal_locked(job);
    } else {
      const CompileError& e = result.outcome.error();
      job.error_code = compiler::error_code_name(e.code);
      job.error_message = e.message;
      job.log = tail(e.log);
      callbacks = finish_locked(job, e.code == CompileError::Code::kCancelled ? JobState::kCancelled
                                                                              : JobState::kFailed);
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
}

void JobManager::publish(const std::string& id, const compiler::CompileResult& result,
                         const std::map<std::string, std::string>& toolchain) {
  std::vector<storage::ArtifactFile> files = {{file_name_for(result.kind), result.binary}};
  if (!result.log.empty()) {
    files.push_back({"compile.log", result.log});
  }
  std::map<std::string, std::string> metadata;
  std::vector<std::string> published;
  std::string producer = "kcache-worker@" + hostname();
  while (true) {
    std::vector<std::string> pending;
    {
      std::lock_guard lock(mu_);
      Job& job = jobs_.at(id);
      if (metadata.empty()) {
        metadata = {{"job", job.id},
                    {"compile_key", job.compile_key},
                    {"backend", job.backend},
                    {"target", job.target},
                    {"output", job.output},
                    {"compile_ms", std::to_string(result.duration.count() / 1000)},
                    {"lowered_names", cachekey::json_text(nlohmann::json(result.lowered_names))},
                    {"toolchain", cachekey::json_text(nlohmann::json(toolchain))}};
      }
      // Keys may be added by submissions that join while we publish.
      for (const std::string& key : job.keys) {
        if (std::find(published.begin(), published.end(), key) == published.end()) {
          pending.push_back(key);
        }
      }
      if (pending.empty()) {
        return;
      }
    }
    for (const std::string& key : pending) {
      auto stored = artifacts_.put(key, files, producer, metadata);
      published.push_back(key);
      if (!stored) {
        spdlog::error("job {}: storing the result under {} failed: {}", id, key,
                      stored.error().message);
        std::lock_guard lock(mu_);
        Job& job = jobs_.at(id);
        job.error_code = "store";
        job.error_message =
            "the compile succeeded but storing it failed: " + stored.error().message;
        return;
      }
    }
  }
}

JobManager::Callbacks JobManager::finish_locked(Job& job, JobState state) {
  job.state = state;
  job.finished_ms = now_ms();
  active_by_key_.erase(job.compile_key);
  if (state == JobState::kFailed && is_cacheable_failure(job.error_code) &&
      config_.negative_ttl.count() > 0) {
    failures_[failure_key(job)] = Failure{job.id, Clock::now() + config_.negative_ttl};
  }
  journal_locked(job);
  on_child_finished_locked(job);
  remember_finished_locked(job);
  Callbacks callbacks;
  waiters_.take(job.id, [&](const std::string& /*id*/, WaitCallback&& done) {
    callbacks.emplace_back(std::move(done), job);
  });
  spdlog::info("job {} {} ({} {} {}) in {} ms{}{}", job.id, job_state_name(state), job.backend,
               job.entry, job.target, job.compile_ms, job.error_message.empty() ? "" : ": ",
               job.error_message);
  return callbacks;
}

void JobManager::remember_finished_locked(const Job& job) {
  finished_order_.push_back(job.id);
  if (job.state == JobState::kFailed && is_cacheable_failure(job.error_code)) {
    // After a restart, a failure still inside its TTL stays remembered.
    const auto age = std::chrono::milliseconds(now_ms() - job.finished_ms);
    if (age < config_.negative_ttl && !failures_.contains(failure_key(job))) {
      failures_[failure_key(job)] = Failure{job.id, Clock::now() + (config_.negative_ttl - age)};
    }
  }
  while (finished_order_.size() > config_.history) {
    const std::string oldest = finished_order_.front();
    finished_order_.pop_front();
    const auto it = jobs_.find(oldest);
    if (it == jobs_.end()) {
      continue;
    }
    if (const auto f = failures_.find(failure_key(it->second));
        f != failures_.end() && f->second.job_id == oldest) {
      failures_.erase(f);
    }
    jobs_.erase(it);
    if (auto ok = journal_->erase(oldest); !ok) {
      spdlog::warn("{}", ok.error());
    }
  }
}

void JobManager::journal_locked(const Job& job) {
  if (auto ok = journal_->put(job); !ok) {
    // The job goes on; only its survival across a restart is at risk.
    spdlog::error("job {}: {}", job.id, ok.error());
  }
}

void JobManager::housekeeping_loop(const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested() && !stopping_) {
    const auto next = waiters_.earliest(Clock::now() + std::chrono::seconds(1));
    const std::uint64_t generation = waiters_generation_;
    waiter_cv_.wait_until(lock, stop, next,
                          [&] { return stopping_ || waiters_generation_ != generation; });
    const auto now = Clock::now();
    Callbacks expired;
    waiters_.take_expired(now, [&](const std::string& id, WaitCallback&& done) {
      expired.emplace_back(std::move(done), jobs_.at(id));
    });
    std::erase_if(failures_, [&](const auto& entry) { return entry.second.expires <= now; });
    if (!expired.empty()) {
      lock.unlock();
      for (auto& [done, job] : expired) {
        done(std::move(job));
      }
      lock.lock();
    }
  }
}

} // namespace kcache::service
