// JobManager's autotune glue: admitting a search and its variant compiles,
// and finishing it after its benchmark. What a search is, its progress and
// the benchmark itself are AutotuneCoordinator's (job_autotune.h).

#include <kcache/protocol/clock.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/job_manager.h>

#include <spdlog/spdlog.h>

#include <future>

namespace kcache::service {

SubmitResult JobManager::submit_autotune(const Submission& submission, bool from_cluster) {
  auto parsed = AutotuneCoordinator::parse(submission.spec_json);
  if (!parsed) {
    return {SubmitStatus::kInvalid, std::nullopt, parsed.error()};
  }
  if (auto refused = intake_.too_large(parsed->base)) {
    return std::move(*refused);
  }
  auto base = intake_.prepare(parsed->base);
  if (!base) {
    return std::move(base.error());
  }
  auto template_key = intake_.compile_key(*base);
  if (!template_key) {
    return {SubmitStatus::kUnavailable, std::nullopt, template_key.error()};
  }
  // GPU variants are timed on this host's GPU: the workers reach it through
  // the driver API.
  const std::string& host_class =
      parsed->device == "cuda" ? host_gpu_tuning_class_ : host_tuning_class_;
  // In cluster mode a search goes to a node of its tuning class (the
  // stream autotune/<backend>/<tuning class>), this one or another.
  const std::string tuning_class =
      cluster_ && !submission.tuning_class.empty() ? submission.tuning_class : host_class;
  if (tuning_class.empty()) {
    return {SubmitStatus::kUnavailable, std::nullopt,
            "autotune: no GPU on this kcached's host to benchmark CUDA variants on"};
  }
  // Variants are timed here: a request for other hardware belongs to a node
  // of that tuning class.
  const bool here = tuning_class == host_class &&
                    (submission.tuning_class.empty() || submission.tuning_class == host_class);
  auto elsewhere = [&] {
    return SubmitResult{SubmitStatus::kUnavailable, std::nullopt,
                        "autotune: this kcached benchmarks on " + host_class + ", not " +
                            submission.tuning_class};
  };
  if (!here && !cluster_) {
    return elsewhere(); // before the cache: its search key is this host's class
  }
  const std::string search_key =
      AutotuneCoordinator::search_key(*template_key, *parsed, tuning_class);
  const std::string key = submission.key.empty() ? search_key : submission.key;
  if (!protocol::wire::is_valid_action_key(key)) {
    return {SubmitStatus::kInvalid, std::nullopt, "invalid key '" + key + "'"};
  }
  if (auto cached = lookup_cached(key, search_key)) {
    return std::move(*cached);
  }
  Job job = JobIntake::job(parsed->base, search_key, submission.spec_json, submission.priority);
  job.kind = JobKind::kAutotune;
  job.tuning_class = tuning_class;
  job.progress_total = 2 * parsed->space.variants.size();
  job.submitter = submission.submitter;
  if (cluster_ && !from_cluster) {
    bool local = false; // one queued here while Redis was down: join it here
    {
      std::lock_guard lock(mu_);
      local = table_.active(search_key) != nullptr || stopping_;
    }
    if (!local) {
      if (auto queued = cluster_->submit(job, key)) {
        return std::move(*queued);
      }
    }
    // Redis cannot be asked: fail open, but only on this node's own hardware.
  }
  if (!here) {
    return elsewhere();
  }
  // Its variant compiles and the reference's count against the queue and the
  // quota now, all of them: a search that does not fit is refused whole (a
  // search compiled in batches would hold its slot, and the client would not
  // learn until later that it cannot run).
  const std::size_t children = parsed->space.variants.size() + 1;
  SubmitResult admitted;
  {
    std::lock_guard lock(mu_);
    // One the cluster handed this node is run, whatever the local bounds.
    admitted = admit_locked(std::move(job), key, /*queue_now=*/false, from_cluster, children);
  }
  if (admitted.status == SubmitStatus::kQueued) {
    begin_autotune(admitted.job->id);
    if (JobLookup now = find(admitted.job->id); now.job) {
      admitted.job = std::move(now.job);
    }
  }
  return admitted;
}

void JobManager::begin_autotune(const std::string& id) {
  std::string spec_json;
  std::string submitter;
  int priority = 0;
  {
    std::lock_guard lock(mu_);
    const Job& job = *table_.find(id);
    spec_json = job.spec_json;
    submitter = job.submitter;
    priority = job.priority;
  }
  auto parsed = AutotuneCoordinator::parse(spec_json);
  std::vector<std::pair<compiler::CompileSpec, std::string>> compiles; // spec, compile key
  std::string error = parsed ? "" : parsed.error();
  if (parsed) {
    std::vector<compiler::Variant> all = parsed->space.variants;
    all.push_back({parsed->search.benchmark.reference, "reference"});
    for (const compiler::Variant& v : all) {
      auto spec = intake_.prepare(compiler::variant_spec(parsed->base, v));
      if (!spec) {
        error = spec.error().message;
        break;
      }
      auto key = intake_.compile_key(*spec);
      if (!key) {
        error = key.error();
        break;
      }
      compiles.emplace_back(std::move(*spec), std::move(*key));
    }
  }
  // What is compiled already (outside the lock: a tier may be remote).
  std::vector<bool> cached;
  cached.reserve(compiles.size());
  for (const auto& [spec, key] : compiles) {
    cached.push_back(publisher_.has(key));
  }

  Callbacks callbacks;
  std::size_t children = 0;
  {
    std::lock_guard lock(mu_);
    if (const auto r = reservations_.find(id); r != reservations_.end()) {
      reserved_ -= r->second; // its children are admitted below (forced) or not at all
      reservations_.erase(r);
    }
    Job& job = *table_.find(id);
    if (!error.empty()) {
      job.error_code = JobError::kInvalidSpec;
      job.error_message = error;
      callbacks = finish_locked(job, JobState::kFailed).callbacks;
    } else {
      job.state = JobState::kRunning;
      job.started_ms = protocol::unix_now_ms();
      ++job.attempts;
      AutotuneCoordinator::State& state = autotune_.begin(id, *parsed);
      job.progress_done = 0;
      for (std::size_t i = 0; i < compiles.size(); ++i) {
        const auto& [spec, key] = compiles[i];
        state.compile_keys.push_back(key);
        if (cached[i]) {
          job.progress_done += i + 1 < compiles.size() ? 1 : 0;
          continue;
        }
        Job child = JobIntake::job(spec, key, compiler::spec_to_json(spec), priority);
        child.parents = {id};
        child.submitter = submitter;
        SubmitResult r = admit_locked(std::move(child), key, /*queue_now=*/true, /*force=*/true);
        if (r.status == SubmitStatus::kQueued || r.status == SubmitStatus::kJoined) {
          ++state.pending;
          ++children;
        } else {
          state.compile_errors[key] = r.message;
          job.progress_done += i + 1 < compiles.size() ? 1 : 0;
        }
      }
      journal_locked(job);
      if (state.pending == 0) {
        enqueue_locked(job);
      }
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  if (children > 0) {
    spdlog::info("autotune job {}: {} variants, {} pruned, {} compiles to run", id,
                 parsed->space.variants.size(), parsed->space.pruned.size(), children);
  }
}

void JobManager::run_autotune(const std::string& id, const std::stop_token& cancel) {
  std::optional<AutotuneCoordinator::State> state;
  std::vector<std::string> keys;
  std::string tuning_class;
  {
    std::lock_guard lock(mu_);
    state = autotune_.get(id);
    const Job& job = *table_.find(id);
    keys = job.keys;
    tuning_class = job.tuning_class;
    state->submitter = job.submitter;
  }
  const AutotuneCoordinator::Outcome outcome =
      AutotuneCoordinator::benchmark(id, *state, keys, tuning_class, *runner_, publisher_, cancel);

  Callbacks callbacks;
  {
    std::lock_guard lock(mu_);
    running_.erase(id);
    Job& job = *table_.find(id);
    job.log = outcome.table_json;
    job.progress_done = job.progress_total;
    if (cancel.stop_requested() && stopping_) {
      job.state = JobState::kQueued; // resumes (recompiles nothing) after a restart
      journal_locked(job);
    } else {
      autotune_.erase(id);
      if (cancel.stop_requested()) {
        job.error_code = JobError::kCancelled;
        callbacks = finish_locked(job, JobState::kCancelled).callbacks;
      } else if (!outcome.failure.empty() || !outcome.publish_error.empty()) {
        job.error_code = outcome.failure.empty() ? JobError::kStore : JobError::kAutotuneFailed;
        job.error_message = outcome.failure.empty() ? outcome.publish_error : outcome.failure;
        callbacks = finish_locked(job, JobState::kFailed).callbacks;
      } else {
        job.output_size = outcome.winner_size;
        job.compile_ms = static_cast<std::int64_t>(outcome.bench_seconds * 1000);
        spdlog::info("autotune job {}: winner {} ({} variant runs in {:.2f} s)", id,
                     outcome.winner_id, outcome.benchmarked, outcome.bench_seconds);
        callbacks = finish_locked(job, JobState::kSucceeded).callbacks;
      }
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
}

Job JobManager::run_cluster_search(const Job& search, const std::stop_token& cancel,
                                   const ClusterJobs::Parts::Progress& progress) {
  Job out = search;
  out.spec_json.clear();
  Submission submission;
  submission.spec_json = search.spec_json;
  submission.priority = search.priority;
  submission.tuning_class = search.tuning_class;
  submission.submitter = search.submitter;
  for (const std::string& k : search.keys) {
    if (k != search.compile_key) {
      submission.key = k; // the submitter's key; joined ones are linked by ClusterJobs
      break;
    }
  }
  SubmitResult admitted = submit_autotune(submission, /*from_cluster=*/true);
  if (admitted.status == SubmitStatus::kCached) {
    out.state = JobState::kSucceeded;
    out.progress_done = out.progress_total;
    return out;
  }
  if (!admitted.job ||
      (admitted.status != SubmitStatus::kQueued && admitted.status != SubmitStatus::kJoined)) {
    out.state = JobState::kFailed;
    out.error_code =
        admitted.status == SubmitStatus::kInvalid ? JobError::kInvalidSpec : JobError::kInternal;
    out.error_message = admitted.message;
    return out;
  }
  const std::string local = admitted.job->id;
  bool cancel_asked = false;
  for (;;) {
    std::promise<std::optional<Job>> answer;
    auto answered = answer.get_future();
    // A quarter second: the cluster's copy of its progress follows it that closely.
    wait(local, Clock::now() + std::chrono::milliseconds(250),
         [&answer](JobLookup found) { answer.set_value(std::move(found.job)); });
    const std::optional<Job> now = answered.get();
    bool stopping = false;
    {
      std::lock_guard lock(mu_);
      stopping = stopping_;
    }
    if (now && now->finished()) {
      out.state = now->state;
      out.error_code = now->error_code;
      out.error_message = now->error_message;
      out.log = now->log;
      out.output_size = now->output_size;
      out.compile_ms = now->compile_ms;
      out.progress_done = now->progress_done;
      out.attempts = search.attempts;
      return out;
    }
    if (stopping) {
      out.state = JobState::kQueued; // unfinished: left for a node to reclaim
      return out;
    }
    if (!now) {
      out.state = JobState::kFailed;
      out.error_code = JobError::kInternal;
      out.error_message = "the local search vanished";
      return out;
    }
    progress(now->progress_done, now->progress_total);
    if (cancel.stop_requested() && !cancel_asked) {
      // Asked here, not in a stop_callback: ClusterJobs requests the stop
      // under its own lock, which cancel() may need.
      (void)this->cancel(local);
      cancel_asked = true;
    }
  }
}

} // namespace kcache::service
