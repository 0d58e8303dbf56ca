#pragma once
// `kcache-worker --bench`: benchmarks autotune variants, request after
// request (bench_protocol.h), until its stdin ends. One worker serves a
// search's rounds: a GPU worker keeps its context and what it loaded.

namespace kcache::compiler {

// Times CUDA variants on device `gpu` (an ordinal). Returns the worker's exit
// status: 0 at EOF, 2 for a malformed stream, kBenchRestartExit after a
// variant that may have broken the GPU context.
int serve_bench(int gpu);

} // namespace kcache::compiler
