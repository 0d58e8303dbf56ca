#include <kcache/cachekey/sha256.h>
#include <kcache/protocol/json_text.h>
#include <kcache/service/job_autotune.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stop_token>
#include <thread>

namespace kcache::service {

using nlohmann::json;

namespace {

// One round, stopped where the search's budget runs out (inside the round:
// the bench worker is killed, as on a cancel). The variants it did not time
// come back as not-timed, so the table says why they have no time.
std::vector<compiler::BenchResult> bench_within(compiler::BenchSession& session,
                                                const compiler::BenchRequest& request,
                                                const std::stop_token& cancel,
                                                std::chrono::steady_clock::time_point deadline,
                                                double budget_seconds) {
  std::stop_source stop;
  const std::stop_callback forward(cancel, [&stop] { stop.request_stop(); });
  std::atomic<bool> expired = false;
  std::jthread timer([&](const std::stop_token& done) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    if (!cv.wait_until(lock, done, deadline, [] { return false; }) && !done.stop_requested()) {
      expired = true;
      stop.request_stop();
    }
  });
  std::vector<compiler::BenchResult> results = session.bench(request, stop.get_token());
  timer.request_stop();
  timer.join();
  if (expired && !cancel.stop_requested()) {
    char budget[32];
    std::snprintf(budget, sizeof budget, "%g s", budget_seconds);
    for (compiler::BenchResult& r : results) {
      // Killed before (or while) it was timed: the runner's word for a stop.
      if (r.status == "error" && r.error.starts_with("the job was cancelled")) {
        r.status = compiler::kNotTimed;
        r.error = std::string("not timed: the search's budget of ") + budget + " ran out";
      }
    }
  }
  return results;
}

// When the budget ends a search before its finalists were checked (halving
// checks only them), the fastest variant's check is what decides whether any
// winner is published: it may run past the budget by this much (a tenth of
// the budget, at least 5 s: one variant's check, with the reference's run).
std::chrono::steady_clock::duration winner_check_allowance(const compiler::AutotuneSearch& search) {
  const double seconds = std::max(5.0, search.budget.max_seconds / 10);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

} // namespace

tl::expected<AutotuneCoordinator::Search, std::string>
AutotuneCoordinator::parse(const std::string& spec_json) {
  const json doc = protocol::parse_json_or_discarded(spec_json);
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
  return Search{std::move(*base), std::move(*search), std::move(*space), cuda ? "cuda" : "cpu"};
}

std::string AutotuneCoordinator::search_key(const std::string& template_key, const Search& search,
                                            const std::string& tuning_class) {
  return "kat-" + cachekey::to_hex(cachekey::Sha256()
                                       .update(template_key)
                                       .update("\n")
                                       .update(search.search.json)
                                       .update("\n")
                                       .update(tuning_class)
                                       .finish());
}

AutotuneCoordinator::State& AutotuneCoordinator::begin(const std::string& id, Search search) {
  State& state = searches_[id];
  state = State{};
  state.search = std::move(search);
  return state;
}

std::optional<AutotuneCoordinator::State> AutotuneCoordinator::get(const std::string& id) const {
  const auto it = searches_.find(id);
  return it == searches_.end() ? std::nullopt : std::optional<State>(it->second);
}

AutotuneCoordinator::Touched AutotuneCoordinator::on_child_finished(const Job& child,
                                                                    JobTable& table) {
  Touched touched;
  for (const std::string& parent_id : child.parents) {
    const auto state = searches_.find(parent_id);
    Job* parent = table.find(parent_id);
    if (state == searches_.end() || parent == nullptr || is_finished(parent->state)) {
      continue;
    }
    if (child.state != JobState::kSucceeded) {
      state->second.compile_errors[child.compile_key] =
          child.error_message.empty() ? job_state_name(child.state) : child.error_message;
    }
    if (child.compile_key != state->second.compile_keys.back()) {
      ++parent->progress_done; // a variant compiled (the reference is not counted)
    }
    if (--state->second.pending == 0) {
      touched.ready.push_back(parent_id);
    }
    touched.parents.push_back(parent_id);
  }
  return touched;
}

AutotuneCoordinator::Outcome
AutotuneCoordinator::benchmark(const std::string& id, const State& state,
                               const std::vector<std::string>& keys,
                               const std::string& tuning_class, const JobRunner& runner,
                               JobPublisher& publisher, const std::stop_token& cancel) {
  const Search& s = state.search;
  // The compiled variants, from the cache.
  std::vector<compiler::CompiledVariant> compiled;
  for (std::size_t i = 0; i < s.space.variants.size(); ++i) {
    const std::string& key = state.compile_keys[i];
    compiler::CompiledVariant c{s.space.variants[i], publisher.first_file(key), ""};
    if (!c.binary) {
      const auto e = state.compile_errors.find(key);
      c.error = e != state.compile_errors.end() ? e->second : "not in the cache after compiling";
    }
    compiled.push_back(std::move(c));
  }
  const std::string& reference_key = state.compile_keys.back();
  auto reference = publisher.first_file(reference_key);

  Outcome out;
  compiler::TuningTable table;
  if (!reference) {
    const auto e = state.compile_errors.find(reference_key);
    out.failure = "the reference variant did not compile: " +
                  (e != state.compile_errors.end() ? e->second : std::string("missing"));
  } else {
    compiler::BenchRequest base;
    base.search_json = s.search.json;
    base.device = s.device;
    base.entry = s.base.name_expressions.front();
    base.reference = {"reference", s.search.benchmark.reference, *reference};
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(s.search.budget.max_seconds));
    // One session for the whole search: its rounds share a worker (a GPU
    // context, loaded variants, inputs and the reference's outputs).
    const std::unique_ptr<compiler::BenchSession> session = runner.open_bench();
    table = compiler::run_search(
        s.search, s.space, compiled, base,
        [&](const compiler::BenchRequest& request, compiler::BenchPhase phase) {
          const auto until = phase == compiler::BenchPhase::kWinnerCheck
                                 ? std::max(deadline, std::chrono::steady_clock::now() +
                                                          winner_check_allowance(s.search))
                                 : deadline;
          return bench_within(*session, request, cancel, until, s.search.budget.max_seconds);
        });
    table.bench_workers = session->workers_started();
    if (!table.winner) {
      out.failure = "no variant ran correctly";
    }
  }
  out.table_json = protocol::json_text(compiler::tuning_table_json(table));

  // The winner is the artifact; the table goes with it, readable by `kcache show`.
  const compiler::CompiledVariant* winner = nullptr;
  for (const auto& c : compiled) {
    if (table.winner && c.variant.id == *table.winner) {
      winner = &c;
    }
  }
  if (out.failure.empty() && winner != nullptr && !cancel.stop_requested()) {
    const std::map<std::string, std::string> metadata = {
        {"autotune_winner", winner->variant.id},
        {"autotune_params", protocol::json_text(json(winner->variant.params))},
        {"tuning_class", tuning_class},
        {"autotune_table", out.table_json},
        {"job", id}};
    if (auto stored =
            publisher.publish_winner(keys, s.device == "cuda" ? "kernel.cubin" : "kernel.so",
                                     *winner->binary, out.table_json, metadata, state.submitter);
        !stored) {
      out.publish_error = stored.error();
    }
  }
  if (winner != nullptr) {
    out.winner_id = winner->variant.id;
    out.winner_size = winner->binary->size();
  }
  out.benchmarked = table.benchmarked;
  out.bench_seconds = table.bench_seconds;
  return out;
}

} // namespace kcache::service
