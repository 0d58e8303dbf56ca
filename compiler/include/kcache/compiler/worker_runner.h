#pragma once
// Runs a compile in a kcache-worker subprocess with limits: CPU time
// (RLIMIT_CPU), address space (RLIMIT_AS) and a wall-clock deadline. A worker
// that crashes, loops or runs out of memory fails this compile with a clear
// diagnostic; the calling process (kcached) is never at risk. A compile that
// hits a limit fails with kResourceLimit, whose message names the limit, the
// peak RSS and the time taken, and whose log keeps the tail of the worker's
// stderr. WorkerOutcome::exit says how the process ended (WorkerExit), which
// is what a caller decides a retry from. Links no compiler: only the worker does.

#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/bench_session.h>
#include <kcache/compiler/worker_protocol.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

struct SpawnLimits; // worker_process.h

struct WorkerLimits {
  std::chrono::milliseconds wall_clock{120'000};
  std::chrono::seconds cpu_time{120};
  // 0: no address-space limit (needed for sanitizer builds, whose shadow
  // mappings alone exceed any sane RLIMIT_AS).
  std::uint64_t memory_bytes = 8ULL << 30;
};

class WorkerRunner {
public:
  WorkerRunner(std::string worker_binary, WorkerLimits limits)
      : worker_binary_(std::move(worker_binary)), limits_(limits) {}

  // A stop request kills the worker and fails the compile with kCancelled.
  WorkerOutcome run(const CompileSpec& spec, const std::stop_token& stop = {}) const;
  // A bench session over `kcache-worker --bench` processes, one kept for as
  // many rounds as it survives (bench_session.h). Each request gets the
  // wall-clock and CPU limits a compile gets; a GPU bench has no
  // address-space limit. With `gpus` (device ordinals of one tuning class),
  // a GPU round is split over one worker per GPU, timing at once; without,
  // it runs on GPU 0.
  std::unique_ptr<BenchSession> open_bench(const std::vector<int>& gpus = {}) const;
  // One round in a session of its own.
  std::vector<BenchResult> bench(const BenchRequest& request,
                                 const std::stop_token& stop = {}) const;
  // What every backend built into the worker would key a compile with.
  tl::expected<Toolchains, std::string> toolchains() const;
  // This host's CPU as the worker's LLVM sees it (for target "native").
  tl::expected<HostTarget, std::string> host_target() const;
  // How compiles are confined ("landlock 7"), or why they run unconfined.
  tl::expected<std::string, std::string> sandbox() const;
  const WorkerLimits& limits() const { return limits_; }
  const std::string& binary() const { return worker_binary_; }

private:
  struct Exchange;
  enum class Limit { kMemory, kCpuTime, kWallClock };
  Exchange exchange(const std::vector<std::string>& args, const std::string& input,
                    const std::stop_token& stop, bool limit_memory,
                    std::chrono::milliseconds wall_clock) const;
  // `reply`: the decoded outcome if the worker answered, else null.
  SpawnLimits spawn_limits(bool limit_memory) const;
  std::optional<Limit> limit_hit(const Exchange& x, const CompileOutcome* reply) const;
  // A kResourceLimit error naming the limit, peak RSS and times; `why`: the
  // line that says what ran out, if any.
  CompileError limit_error(Limit limit, const Exchange& x, std::string_view why,
                           const std::string& log) const;

  std::string worker_binary_;
  WorkerLimits limits_;
};

} // namespace kcache::compiler
