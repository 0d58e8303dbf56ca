#pragma once
// Benchmarks autotune variants on this CPU (inside kcache-worker --bench):
// each shared object is loaded from memory, called through libffi with the
// benchmark's arguments on a pinned thread, timed with the steady clock
// (warm-up, then the median of the repeats, inputs rotating between sets) and
// its outputs compared with the reference variant's.

#include <kcache/compiler/bench_protocol.h>

#include <cstdio>

namespace kcache::compiler {

// Writes one result line per variant to `out`, flushed as each finishes.
void run_cpu_bench(const BenchRequest& request, std::FILE* out);

} // namespace kcache::compiler
