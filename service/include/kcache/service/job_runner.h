#pragma once
// What runs a job's compile or benchmark: in kcached a kcache-worker
// subprocess (WorkerJobRunner over compiler::WorkerRunner); in unit tests a
// double that answers from a script, with no compiler at all.
//
// Called from the worker pool's threads, several at once: implementations
// are thread-safe. A stop request must end a run soon (as a kCancelled error).

#include <kcache/cachekey/hardware.h>
#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/bench_session.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/worker_protocol.h>
#include <kcache/compiler/worker_runner.h>
#include <kcache/service/config.h>
#include <kcache/service/job.h>

#include <tl/expected.hpp>

#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace kcache::service {

class JobRunner {
public:
  virtual ~JobRunner() = default;

  virtual compiler::WorkerOutcome run(const compiler::CompileSpec& spec,
                                      const std::stop_token& cancel) const = 0;
  // What times a search's rounds, one per search (compiler/bench_session.h).
  virtual std::unique_ptr<compiler::BenchSession> open_bench() const = 0;
  // What each backend would key a compile with: a backend missing here is
  // one this runner cannot build.
  virtual const compiler::Toolchains& toolchains() const = 0;
  // This host's CPU (for target "native"); nullopt when unknown.
  virtual const std::optional<compiler::HostTarget>& host_target() const = 0;
  // Names the runner in messages ("... is not built into <name>").
  virtual const std::string& name() const = 0;
};

// The job error a worker's CompileError becomes (same names).
JobError job_error_of(compiler::CompileError::Code code);
// Whether a worker's fate makes its failure the machinery's, not the spec's:
// the worker could not start, was killed by a signal no limit of the spec
// explains (the OOM killer, an operator's kill -9), answered garbage or
// nothing, or reported an internal failure of its own. Such a compile is
// retried, and never remembered as the spec's failure.
bool is_infrastructure_failure(compiler::WorkerExit exit);

class WorkerJobRunner final : public JobRunner {
public:
  // Asks `kcache-worker` for its toolchains (required), its sandbox and its
  // host CPU (both logged when missing), with the limits of `config`.
  static tl::expected<std::unique_ptr<WorkerJobRunner>, std::string>
  create(const JobsConfig& config);
  WorkerJobRunner(compiler::WorkerRunner runner, compiler::Toolchains toolchains,
                  std::optional<compiler::HostTarget> host_target, std::vector<int> bench_gpus = {})
      : runner_(std::move(runner)), toolchains_(std::move(toolchains)),
        host_target_(std::move(host_target)), bench_gpus_(std::move(bench_gpus)) {}

  compiler::WorkerOutcome run(const compiler::CompileSpec& spec,
                              const std::stop_token& cancel) const override {
    return runner_.run(spec, cancel);
  }
  std::unique_ptr<compiler::BenchSession> open_bench() const override {
    return runner_.open_bench(bench_gpus_);
  }
  const compiler::Toolchains& toolchains() const override { return toolchains_; }
  const std::optional<compiler::HostTarget>& host_target() const override { return host_target_; }
  const std::string& name() const override { return runner_.binary(); }

private:
  const compiler::WorkerRunner runner_;
  const compiler::Toolchains toolchains_;
  const std::optional<compiler::HostTarget> host_target_;
  const std::vector<int> bench_gpus_; // a bench worker each; empty: GPU 0
};

// The GPUs a search's rounds are split over: `setting` parsed ("0,1"; each
// must be one of `detected`, when a GPU is), or with "" every detected GPU
// of the first one's tuning class (none without a GPU).
tl::expected<std::vector<int>, std::string>
bench_gpus(const std::string& setting, const std::vector<cachekey::GpuInfo>& detected);

} // namespace kcache::service
