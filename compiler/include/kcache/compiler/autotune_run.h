#pragma once
// The benchmarking half of an autotune search: given the compiled variants,
// run the strategy's rounds (one for exhaustive and random-k; successive
// halving times everyone once, keeps the fastest 1/eta per round and gives the
// survivors eta times the repeats, up to the benchmark's, after discarding those over `discard`
// times the best), pick the fastest correct variant and keep a row for every variant of the
// space, pruned, discarded, untimed and failed ones included: the tuning table.

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/bench_protocol.h>

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kcache::compiler {

struct TuningRow {
  std::string id;
  Bindings params;
  // pruned | compile-failed | ok | wrong | error | eliminated (halving) |
  // discarded (halving: too slow after a round) | not-timed (the budget ran out)
  std::string status;
  double median_us = 0;
  double max_error = 0;
  int rounds = 0; // benchmark rounds it took part in
  std::string error;
};

struct TuningTable {
  std::vector<TuningRow> rows;
  std::optional<std::string> winner; // id of the fastest correct variant
  std::size_t benchmarked = 0;       // variants benchmarked, summed over rounds
  std::size_t timed_runs = 0;        // timed calls, summed over rounds
  double bench_seconds = 0;
  std::string stopped; // why the search ended before its strategy did; "" when it did not
  std::vector<double> round_seconds; // each round's bench time
  int bench_workers =
      0; // worker processes the rounds ran in (one unless one crashed or was stopped)
};

// What a BenchFn answers for a variant it did not time because the search's
// budget ran out (the error says so); run_search keeps the best measured.
inline constexpr const char* kNotTimed = "not-timed";

nlohmann::json tuning_table_json(const TuningTable& table);
tl::expected<TuningTable, std::string> tuning_table_from_json(const nlohmann::json& doc);

// Why run_search asks a BenchFn to time variants.
enum class BenchPhase {
  kRound,       // a round of the search: stopped where the budget runs out
  kWinnerCheck, // the budget ended the search before the fastest variant's
                // outputs were checked: this one check decides whether there
                // is a winner at all, so a BenchFn lets it run past the budget
                // (bounded by an allowance of its own)
};

// Times a round. It may stop when the budget (search.budget.max_seconds from
// run_search's start) runs out, answering kNotTimed for the variants left.
using BenchFn = std::function<std::vector<BenchResult>(const BenchRequest&, BenchPhase)>;

struct CompiledVariant {
  Variant variant;
  std::optional<std::string> binary; // nullopt: it did not compile
  std::string error;                 // why not
};

// `request_base` carries the search, device, entry and reference; its variant
// list is filled per round.
TuningTable run_search(const AutotuneSearch& search, const Space& space,
                       const std::vector<CompiledVariant>& compiled,
                       const BenchRequest& request_base, const BenchFn& bench);

} // namespace kcache::compiler
