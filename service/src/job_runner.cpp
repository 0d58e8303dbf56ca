#include <kcache/cachekey/hardware.h>
#include <kcache/service/job_runner.h>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <set>

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
  auto gpus = bench_gpus(config.bench_gpus, cachekey::detect_gpus());
  if (!gpus) {
    return tl::unexpected(gpus.error());
  }
  if (gpus->size() > 1) {
    spdlog::info("autotune: searches benchmark on {} GPUs at once ({})", gpus->size(),
                 fmt::join(*gpus, ","));
  }
  if (std::set<int>(gpus->begin(), gpus->end()).size() < gpus->size()) {
    spdlog::warn("autotune: bench-gpus names a GPU twice; its bench workers share it, and time "
                 "each other's load");
  }
  return std::make_unique<WorkerJobRunner>(std::move(runner), std::move(*toolchains),
                                           std::move(host_target), std::move(*gpus));
}

tl::expected<std::vector<int>, std::string>
bench_gpus(const std::string& setting, const std::vector<cachekey::GpuInfo>& detected) {
  std::vector<int> out;
  if (setting.empty()) {
    for (const cachekey::GpuInfo& gpu : detected) {
      if (cachekey::hardware_class(gpu).tuning_class ==
          cachekey::hardware_class(detected.front()).tuning_class) {
        out.push_back(gpu.ordinal);
      }
    }
    return out;
  }
  std::size_t start = 0;
  while (start <= setting.size()) {
    const std::size_t comma = std::min(setting.find(',', start), setting.size());
    const std::string item = setting.substr(start, comma - start);
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), ordinal);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || ordinal < 0 ||
        ordinal > 255) {
      return tl::unexpected("bench-gpus: \"" + setting +
                            "\" is not a list of GPU ordinals such as 0,1");
    }
    // A host without a GPU benchmarks no CUDA search: the list goes unused.
    if (!detected.empty() && static_cast<std::size_t>(ordinal) >= detected.size()) {
      return tl::unexpected("bench-gpus: there is no GPU " + item + " (this host has " +
                            std::to_string(detected.size()) + ")");
    }
    out.push_back(ordinal);
    start = comma + 1;
  }
  return out;
}

} // namespace kcache::service
