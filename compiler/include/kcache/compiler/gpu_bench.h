#pragma once
// Benchmarks autotune variants (CUBINs) on this host's GPU through the driver
// API: a variant whose block or shared memory exceeds what its kernel or the
// device allows is dropped as "over-limits" before it runs; the others are
// launched with the benchmark's geometry, timed with CUDA events (warm-up,
// then the median of the repeats, input sets rotating), and their outputs
// compared with the reference variant's.
//
// A GpuBench serves a whole search: the rounds of successive halving time
// the same variants again with more repeats, so it keeps their modules
// (keyed by their CUBIN's bytes), the arguments on the device and the
// reference's outputs while the search's inputs stay the same.

#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/cuda_driver.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

namespace kcache::compiler {

class GpuBench {
public:
  explicit GpuBench(CudaDriver& gpu);
  ~GpuBench();
  GpuBench(const GpuBench&) = delete;
  GpuBench& operator=(const GpuBench&) = delete;

  // Times the request's variants in order, passing each result to `emit` as
  // it is known. Stops after the first variant whose launch failed on the
  // device (CUDA faults are sticky: the context may be unusable) and returns
  // the results so far; the caller decides whether to go on.
  std::vector<BenchResult> run(const BenchRequest& request,
                               const std::function<void(const BenchResult&)>& emit = {});
  // Whether a launch (a variant's or the reference's) failed on the device:
  // the context may hold a sticky error, so whoever owns it starts afresh
  // before timing anything else.
  bool context_lost() const { return context_lost_; }

private:
  struct State;
  CudaDriver& gpu_;
  std::unique_ptr<State> state_;
  bool context_lost_ = false;
};

// Every variant of the request: one result each, in request order (after a
// variant that failed on the device, the rest run in the same context).
std::vector<BenchResult> bench_on_gpu(GpuBench& bench, const BenchRequest& request);

} // namespace kcache::compiler
