#pragma once
// Benchmarks autotune variants (CUBINs) on this host's GPU through the driver
// API: a variant whose block or shared memory exceeds what its kernel or the
// device allows is dropped as "over-limits" before it runs; the others are
// launched with the benchmark's geometry, timed with CUDA events (warm-up,
// then the median of the repeats, input sets rotating), and their outputs
// compared with the reference variant's.

#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/cuda_driver.h>

#include <cstdio>
#include <vector>

namespace kcache::compiler {

// One result per variant, in request order.
std::vector<BenchResult> bench_on_gpu(CudaDriver& gpu, const BenchRequest& request);

// kcache-worker --bench for device "cuda": one line per variant to `out`.
void run_gpu_bench(const BenchRequest& request, std::FILE* out);

} // namespace kcache::compiler
