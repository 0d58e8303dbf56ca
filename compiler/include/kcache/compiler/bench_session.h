#pragma once
// What times a search's rounds: one session per search, so that what rounds
// share (a worker process, a GPU context, loaded variants, the benchmark's
// inputs and the reference's outputs) is set up once, not once per round.
// WorkerRunner::open_bench gives one over kcache-worker --bench processes.

#include <kcache/compiler/bench_protocol.h>

#include <stop_token>
#include <vector>

namespace kcache::compiler {

class BenchSession {
public:
  virtual ~BenchSession() = default;
  // One result per variant of the request, in order. A variant that crashes
  // or hangs its worker is recorded as an error and the rest go on in a
  // fresh one; a stop request ends the round (the variants not timed are
  // errors that say "the job was cancelled").
  virtual std::vector<BenchResult> bench(const BenchRequest& request,
                                         const std::stop_token& stop) = 0;
  // Worker processes started so far: one for a search that nothing crashed,
  // stopped or cut short.
  virtual int workers_started() const = 0;
};

} // namespace kcache::compiler
