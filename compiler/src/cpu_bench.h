#pragma once
// Benchmarks autotune variants on this CPU (inside kcache-worker --bench):
// each shared object is loaded from memory, called through libffi with the
// benchmark's arguments on a pinned thread, timed with the steady clock
// (warm-up, then the median of the repeats, inputs rotating between sets) and
// its outputs compared with the reference variant's.
//
// A CPU variant is code running in this process: the Landlock sandbox keeps
// it from host files, TCP, abstract Unix sockets and signals to other
// processes, but not from this process's memory, so what the worker reports
// of a variant (its time, its check) is only as honest as the variant. It
// decides nothing beyond its own spec's search: the winner is published
// under the key of the spec that carried the variant's source.

#include <kcache/compiler/bench_protocol.h>

#include <cstdio>

namespace kcache::compiler {

// Writes one result line per variant to `out`, flushed as each finishes.
void run_cpu_bench(const BenchRequest& request, std::FILE* out);

} // namespace kcache::compiler
