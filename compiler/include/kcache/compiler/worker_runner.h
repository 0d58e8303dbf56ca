#pragma once
// Runs a compile in a kcache-worker subprocess with limits: CPU time
// (RLIMIT_CPU), address space (RLIMIT_AS) and a wall-clock deadline. A worker
// that crashes, loops or runs out of memory fails this compile with a clear
// diagnostic; the calling process (kcached) is never at risk. Links no
// compiler: only the worker does.

#include <kcache/compiler/worker_protocol.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace kcache::compiler {

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

  WorkerOutcome run(const CompileSpec& spec) const;
  const WorkerLimits& limits() const { return limits_; }

private:
  std::string worker_binary_;
  WorkerLimits limits_;
};

} // namespace kcache::compiler
