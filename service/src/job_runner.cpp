#include <kcache/service/job_runner.h>

#include <spdlog/spdlog.h>

namespace kcache::service {

JobError job_error_of(compiler::CompileError::Code code) {
  using Code = compiler::CompileError::Code;
  switch (code) {
  case Code::kInvalidSpec:
    return JobError::kInvalidSpec;
  case Code::kCompileFailed:
    return JobError::kCompileFailed;
  case Code::kUnavailable:
    return JobError::kUnavailable;
  case Code::kInternal:
    return JobError::kInternal;
  case Code::kCancelled:
    return JobError::kCancelled;
  case Code::kResourceLimit:
    return JobError::kResourceLimit;
  }
  return JobError::kInternal;
}

bool is_infrastructure_failure(compiler::WorkerExit exit) {
  using Exit = compiler::WorkerExit;
  switch (exit) {
  case Exit::kInternalError:
  case Exit::kKilledBySignal:
  case Exit::kProtocolError:
  case Exit::kSpawnFailed:
    return true;
  case Exit::kCompleted:
  case Exit::kCompileError:
  case Exit::kTimedOut:    // the spec's own limit: retrying would hit it again
  case Exit::kMemoryLimit: // likewise
  case Exit::kExecFailed:  // a missing binary stays missing
  case Exit::kCancelled:
    return false;
  }
  return false;
}

tl::expected<std::unique_ptr<WorkerJobRunner>, std::string>
WorkerJobRunner::create(const JobsConfig& config) {
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
  return std::make_unique<WorkerJobRunner>(std::move(runner), std::move(*toolchains),
                                           std::move(host_target));
}

} // namespace kcache::service
