// Autotune jobs of JobManager. A search job admits one compile job per
// variant (and the reference) as its children: ordinary compile jobs, so
// variants compile in parallel on the worker pool, join identical compiles and
// land in the cache under their compile keys (a search for another tuning
// class reuses them). When the last child finishes, the search job enters the
// queue; a worker thread then benchmarks the compiled variants in
// `kcache-worker --bench` processes and publishes the winner with its tuning
// table.

#include <kcache/cachekey/json_text.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/cachekey/wire.h>
#include <kcache/compiler/autotune_run.h>
#include <kcache/service/job_manager.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace kcache::service {

using nlohmann::json;

namespace {

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ParsedSearch {
  compiler::CompileSpec base;
  compiler::AutotuneSearch search;
  compiler::Space space;
  std::string device; // cpu | cuda
};

tl::expected<ParsedSearch, std::string> parse_search(const std::string& spec_json) {
  const json doc = json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("autotune")) {
    return tl::unexpected(std::string("not an autotune spec"));
  }
  auto base = compiler::spec_from_json(spec_json);
  if (!base) {
    return tl::unexpected(base.error());
  }
  if (base->name_expressions.empty()) {
    return tl::unexpected(std::string("autotune: name the kernel's entry in name_expressions"));
  }
  const bool cpu =
      (base->backend == compiler::Backend::kCpp || base->backend == compiler::Backend::kLlvmIr) &&
      base->output == compiler::OutputKind::kSharedObject;
  const bool cuda =
      (base->backend == compiler::Backend::kCuda || base->backend == compiler::Backend::kPtx) &&
      base->output == compiler::OutputKind::kCubin;
  if (!cpu && !cuda) {
    return tl::unexpected(std::string(
        "autotune: variants are CPU shared objects (cpp, llvm-ir; output \"shared\") or CUBINs "
        "(cuda, ptx; output \"cubin\")"));
  }
  auto search = compiler::parse_autotune(doc["autotune"].dump());
  if (!search) {
    return tl::unexpected(search.error());
  }
  auto space = compiler::expand(*search);
  if (!space) {
    return tl::unexpected(space.error());
  }
  return ParsedSearch{std::move(*base), std::move(*search), std::move(*space),
                      cuda ? "cuda" : "cpu"};
}

} // namespace

SubmitResult JobManager::submit_autotune(const Submission& submission) {
  auto parsed = parse_search(submission.spec_json);
  if (!parsed) {
    return {SubmitStatus::kInvalid, std::nullopt, parsed.error()};
  }
  auto base = prepare(parsed->base);
  if (!base) {
    return std::move(base.error());
  }
  auto template_key = compile_key_of(*base);
  if (!template_key) {
    return {SubmitStatus::kUnavailable, std::nullopt, template_key.error()};
  }
  // GPU variants are timed on this host's GPU: the workers reach it through
  // the driver API.
  const std::string& host_class =
      parsed->device == "cuda" ? host_gpu_tuning_class_ : host_tuning_class_;
  if (host_class.empty()) {
    return {SubmitStatus::kUnavailable, std::nullopt,
            "autotune: no GPU on this kcached's host to benchmark CUDA variants on"};
  }
  // Variants are timed here: a request for other hardware belongs to a node
  // of that tuning class.
  if (!submission.tuning_class.empty() && submission.tuning_class != host_class) {
    return {SubmitStatus::kUnavailable, std::nullopt,
            "autotune: this kcached benchmarks on " + host_class + ", not " +
                submission.tuning_class};
  }
  const std::string& tuning_class = host_class;
  // The search's identity: the template (with its toolchain), the search, and
  // the hardware it is timed on.
  const std::string search_key = "kat-" + cachekey::to_hex(cachekey::Sha256()
                                                               .update(*template_key)
                                                               .update("\n")
                                                               .update(parsed->search.json)
                                                               .update("\n")
                                                               .update(tuning_class)
                                                               .finish());
  const std::string key = submission.key.empty() ? search_key : submission.key;
  if (!cachekey::wire::is_valid_action_key(key)) {
    return {SubmitStatus::kInvalid, std::nullopt, "invalid key '" + key + "'"};
  }
  if (auto cached = lookup_cached(key, search_key)) {
    return std::move(*cached);
  }
  Job job = compile_job(parsed->base, search_key, submission.spec_json, submission.priority);
  job.kind = "autotune";
  job.tuning_class = tuning_class;
  job.progress_total = 2 * parsed->space.variants.size();
  SubmitResult admitted;
  {
    std::lock_guard lock(mu_);
    admitted = admit_locked(std::move(job), key, /*queue_now=*/false, /*force=*/false);
  }
  if (admitted.status == SubmitStatus::kQueued) {
    begin_autotune(admitted.job->id);
    if (auto now = find(admitted.job->id)) {
      admitted.job = std::move(*now);
    }
  }
  return admitted;
}

void JobManager::begin_autotune(const std::string& id) {
  std::string spec_json;
  int priority = 0;
  {
    std::lock_guard lock(mu_);
    const Job& job = jobs_.at(id);
    spec_json = job.spec_json;
    priority = job.priority;
  }
  auto parsed = parse_search(spec_json);
  std::vector<std::pair<compiler::CompileSpec, std::string>> compiles; // spec, compile key
  std::string error = parsed ? "" : parsed.error();
  if (parsed) {
    std::vector<compiler::Variant> all = parsed->space.variants;
    all.push_back({parsed->search.benchmark.reference, "reference"});
    for (const compiler::Variant& v : all) {
      auto spec = prepare(compiler::variant_spec(parsed->base, v));
      if (!spec) {
        error = spec.error().message;
        break;
      }
      auto key = compile_key_of(*spec);
      if (!key) {
        error = key.error();
        break;
      }
      compiles.emplace_back(std::move(*spec), std::move(*key));
    }
  }
  // What is compiled already (outside the lock: a tier may be remote).
  std::vector<bool> cached;
  for (const auto& [spec, key] : compiles) {
    auto record = artifacts_.get_record(key);
    cached.push_back(record && *record);
  }

  Callbacks callbacks;
  std::vector<std::string> children;
  {
    std::lock_guard lock(mu_);
    Job& job = jobs_.at(id);
    if (!error.empty()) {
      job.error_code = "invalid-spec";
      job.error_message = error;
      callbacks = finish_locked(job, JobState::kFailed);
    } else {
      job.state = JobState::kRunning;
      job.started_ms = wall_ms();
      ++job.attempts;
      AutotuneState& state = autotunes_[id];
      state.device = parsed->device;
      state.base = parsed->base;
      state.search = parsed->search;
      state.space = parsed->space;
      job.progress_done = 0;
      for (std::size_t i = 0; i < compiles.size(); ++i) {
        const auto& [spec, key] = compiles[i];
        state.compile_keys.push_back(key);
        if (cached[i]) {
          job.progress_done += i + 1 < compiles.size() ? 1 : 0;
          continue;
        }
        Job child = compile_job(spec, key, compiler::spec_to_json(spec), priority);
        child.parents = {id};
        SubmitResult r = admit_locked(std::move(child), key, /*queue_now=*/true, /*force=*/true);
        if (r.status == SubmitStatus::kQueued || r.status == SubmitStatus::kJoined) {
          ++state.pending;
          children.push_back(r.job->id);
        } else {
          state.compile_errors[key] = r.message;
          job.progress_done += i + 1 < compiles.size() ? 1 : 0;
        }
      }
      journal_locked(job);
      if (state.pending == 0) {
        queue_.push(id, job.priority, /*force=*/true);
        work_cv_.notify_one();
      }
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
  if (!children.empty()) {
    spdlog::info("autotune job {}: {} variants, {} pruned, {} compiles to run", id,
                 parsed->space.variants.size(), parsed->space.pruned.size(), children.size());
  }
}

void JobManager::on_child_finished_locked(const Job& child) {
  for (const std::string& parent_id : child.parents) {
    const auto state = autotunes_.find(parent_id);
    const auto parent = jobs_.find(parent_id);
    if (state == autotunes_.end() || parent == jobs_.end() || is_finished(parent->second.state)) {
      continue;
    }
    if (child.state != JobState::kSucceeded) {
      state->second.compile_errors[child.compile_key] =
          child.error_message.empty() ? job_state_name(child.state) : child.error_message;
    }
    if (child.compile_key != state->second.compile_keys.back()) {
      ++parent->second.progress_done; // a variant compiled (the reference is not counted)
    }
    if (--state->second.pending == 0) {
      queue_.push(parent_id, parent->second.priority, /*force=*/true);
      work_cv_.notify_one();
    }
    journal_locked(parent->second);
  }
}

void JobManager::run_autotune(const std::string& id, const std::stop_token& cancel) {
  AutotuneState state;
  {
    std::lock_guard lock(mu_);
    state = autotunes_.at(id);
  }
  // The compiled variants, from the cache.
  auto load = [&](const std::string& key) -> std::optional<std::string> {
    auto artifact = artifacts_.get(key);
    if (artifact && *artifact && !(*artifact)->files.empty()) {
      return (*artifact)->files.front().data;
    }
    return std::nullopt;
  };
  std::vector<compiler::CompiledVariant> compiled;
  for (std::size_t i = 0; i < state.space.variants.size(); ++i) {
    const std::string& key = state.compile_keys[i];
    compiler::CompiledVariant c{state.space.variants[i], load(key), ""};
    if (!c.binary) {
      const auto e = state.compile_errors.find(key);
      c.error = e != state.compile_errors.end() ? e->second : "not in the cache after compiling";
    }
    compiled.push_back(std::move(c));
  }
  const std::string& reference_key = state.compile_keys.back();
  auto reference = load(reference_key);

  compiler::TuningTable table;
  std::string failure;
  if (!reference) {
    const auto e = state.compile_errors.find(reference_key);
    failure = "the reference variant did not compile: " +
              (e != state.compile_errors.end() ? e->second : std::string("missing"));
  } else {
    compiler::BenchRequest base;
    base.search_json = state.search.json;
    base.device = state.device;
    base.entry = state.base.name_expressions.front();
    base.reference = {"reference", state.search.benchmark.reference, *reference};
    table = compiler::run_search(
        state.search, state.space, compiled, base,
        [&](const compiler::BenchRequest& request) { return runner_.bench(request, cancel); });
    if (!table.winner) {
      failure = "no variant ran correctly";
    }
  }
  const std::string table_json = cachekey::json_text(compiler::tuning_table_json(table));

  // The winner is the artifact; the table goes with it, readable by `kcache show`.
  std::vector<std::string> keys;
  std::string tuning_class;
  {
    std::lock_guard lock(mu_);
    keys = jobs_.at(id).keys;
    tuning_class = jobs_.at(id).tuning_class;
  }
  std::string publish_error;
  const compiler::CompiledVariant* winner = nullptr;
  for (const auto& c : compiled) {
    if (table.winner && c.variant.id == *table.winner) {
      winner = &c;
    }
  }
  if (failure.empty() && winner != nullptr && !cancel.stop_requested()) {
    const std::string file = state.device == "cuda" ? "kernel.cubin" : "kernel.so";
    const std::map<std::string, std::string> metadata = {
        {"autotune_winner", winner->variant.id},
        {"autotune_params", cachekey::json_text(json(winner->variant.params))},
        {"tuning_class", tuning_class},
        {"autotune_table", table_json},
        {"job", id}};
    for (const std::string& key : keys) {
      auto stored = artifacts_.put(key, {{file, *winner->binary}, {"autotune.json", table_json}},
                                   "kcache-autotune", metadata);
      if (!stored) {
        publish_error = stored.error().message;
        break;
      }
    }
  }

  Callbacks callbacks;
  {
    std::lock_guard lock(mu_);
    --running_count_;
    running_.erase(id);
    Job& job = jobs_.at(id);
    job.log = table_json;
    job.progress_done = job.progress_total;
    if (cancel.stop_requested() && stopping_) {
      job.state = JobState::kQueued; // resumes (recompiles nothing) after a restart
      journal_locked(job);
    } else {
      autotunes_.erase(id);
      if (cancel.stop_requested()) {
        job.error_code = "cancelled";
        callbacks = finish_locked(job, JobState::kCancelled);
      } else if (!failure.empty() || !publish_error.empty()) {
        job.error_code = failure.empty() ? "store" : "autotune-failed";
        job.error_message = failure.empty() ? publish_error : failure;
        callbacks = finish_locked(job, JobState::kFailed);
      } else {
        job.output_size = winner->binary->size();
        job.compile_ms = static_cast<std::int64_t>(table.bench_seconds * 1000);
        spdlog::info("autotune job {}: winner {} ({} variant runs in {:.2f} s)", id,
                     winner->variant.id, table.benchmarked, table.bench_seconds);
        callbacks = finish_locked(job, JobState::kSucceeded);
      }
    }
  }
  for (auto& [done, job] : callbacks) {
    done(std::move(job));
  }
}

} // namespace kcache::service
