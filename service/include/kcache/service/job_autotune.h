#pragma once
// The autotune coordinator. A search job admits one compile job per variant
// (and the reference) as its children: ordinary compile jobs, so variants
// compile in parallel on the worker pool, join identical compiles and land in
// the cache under their compile keys (a search for another tuning class
// reuses them). When the last child finishes, the search is ready to
// benchmark: a worker thread times the compiled variants through the runner
// and publishes the winner with its tuning table.
//
// It keeps each active search's state. Not thread-safe: JobManager calls it
// under its lock, except benchmark(), which runs on a worker thread with a
// copy of the state.

#include <kcache/compiler/autotune_run.h>
#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/service/job.h>
#include <kcache/service/job_publisher.h>
#include <kcache/service/job_runner.h>
#include <kcache/service/job_table.h>

#include <cstddef>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

namespace kcache::service {

class AutotuneCoordinator {
public:
  struct Search {
    compiler::CompileSpec base;
    compiler::AutotuneSearch search;
    compiler::Space space;
    std::string device; // cpu | cuda: where the variants are timed
  };
  // The search in an autotune spec, checked: an entry named, variants the
  // benchmark can load (CPU shared objects or CUBINs), a space to search.
  static tl::expected<Search, std::string> parse(const std::string& spec_json);
  // The search's identity: the template (with its toolchain), the search, and
  // the hardware it is timed on.
  static std::string search_key(const std::string& template_key, const Search& search,
                                const std::string& tuning_class);

  struct State {
    Search search;
    std::vector<std::string> compile_keys;             // per space.variants, then the reference's
    std::map<std::string, std::string> compile_errors; // compile key -> why it failed
    std::size_t pending = 0;                           // children still compiling
    std::string submitter;                             // the winner's records name it as writer
  };
  State& begin(const std::string& id, Search search);
  bool contains(const std::string& id) const { return searches_.contains(id); }
  std::optional<State> get(const std::string& id) const;
  void erase(const std::string& id) { searches_.erase(id); }

  // A child compile finished: records its error and its parents' progress.
  // Returns the parents it touched (to journal) and, of those, the ones whose
  // last child it was (to queue for their benchmark).
  struct Touched {
    std::vector<std::string> parents, ready;
  };
  Touched on_child_finished(const Job& child, JobTable& table);

  struct Outcome {
    std::string table_json;    // the tuning table, always
    std::string failure;       // why no winner; "" when there is one
    std::string publish_error; // storing the winner failed
    std::string winner_id;     // "" without a winner
    std::uint64_t winner_size = 0;
    std::size_t benchmarked = 0; // variant runs, summed over rounds
    double bench_seconds = 0;
  };
  // Times the compiled variants (read back through `publisher`) and, unless
  // cancelled, publishes the winner under `keys`.
  static Outcome benchmark(const std::string& id, const State& state,
                           const std::vector<std::string>& keys, const std::string& tuning_class,
                           const JobRunner& runner, JobPublisher& publisher,
                           const std::stop_token& cancel);

private:
  std::unordered_map<std::string, State> searches_; // autotune job id -> its search
};

} // namespace kcache::service
