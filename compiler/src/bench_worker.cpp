// WorkerRunner::open_bench: a search's rounds in one kcache-worker --bench
// process, for as long as it lives. A worker that crashes or hangs costs the
// variant it was running (the results stream in order, one line each, so the
// first unreported variant is the one) and the rest go on in a fresh worker.

#include "worker_process.h"

#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/worker_runner.h>

#include <sys/wait.h>

#include <cstring>
#include <map>
#include <set>

namespace kcache::compiler {
namespace {

class BenchWorker final : public BenchSession {
public:
  explicit BenchWorker(const WorkerRunner& runner) : runner_(runner) {}

  std::vector<BenchResult> bench(const BenchRequest& request,
                                 const std::stop_token& stop) override {
    std::map<std::string, BenchResult> results;
    BenchRequest pending = request;
    while (!pending.variants.empty()) {
      const Round round = run_round(pending, stop, results);
      if (round.all_reported) {
        break;
      }
      std::vector<BenchVariant> rest;
      bool blamed = round.blame_none;
      for (BenchVariant& v : pending.variants) {
        if (results.contains(v.id)) {
          continue;
        }
        if (!blamed || round.fatal) {
          // The first unreported variant was running when the worker ended;
          // after a cancel or a failed start, none of the rest will run either.
          results[v.id] = BenchResult{v.id, "error", 0, 0, 0, round.why};
          blamed = true;
          continue;
        }
        rest.push_back(std::move(v));
      }
      pending.variants = std::move(rest);
    }
    std::vector<BenchResult> out;
    out.reserve(request.variants.size());
    for (const BenchVariant& v : request.variants) {
      const auto it = results.find(v.id);
      out.push_back(it != results.end() ? it->second
                                        : BenchResult{v.id, "error", 0, 0, 0, "no result"});
    }
    return out;
  }

  int workers_started() const override { return started_; }

private:
  struct Round {
    bool all_reported = false;
    bool blame_none = false; // the rest go on in a fresh worker, none blamed
    bool fatal = false;      // cancelled, or no worker: the rest all fail
    std::string why;         // how the worker ended
  };

  Round run_round(const BenchRequest& pending, const std::stop_token& stop,
                  std::map<std::string, BenchResult>& results) {
    Round round;
    const bool gpu = pending.device == "cuda";
    const bool fresh = !process_;
    if (fresh) {
      // No address-space limit on a GPU bench: the CUDA driver reserves
      // virtual address space for unified addressing far beyond any
      // RLIMIT_AS a worker gets (cuInit fails under one). Its host memory
      // stays bounded: the benchmark's buffers are capped at 4 GiB
      // (bench_inputs.cpp).
      const WorkerLimits& limits = runner_.limits();
      auto spawned =
          WorkerProcess::spawn(runner_.binary(), {"--bench"},
                               SpawnLimits{limits.cpu_time, gpu ? 0 : limits.memory_bytes,
                                           /*renewable_cpu_time=*/true});
      if (!spawned) {
        round.fatal = true;
        round.why = spawned.error();
        return round;
      }
      process_ = std::move(*spawned);
      ++started_;
    } else {
      process_->extend_cpu_limit(runner_.limits().cpu_time);
    }
    std::set<std::string> wanted;
    for (const BenchVariant& v : pending.variants) {
      wanted.insert(v.id);
    }
    // Results are decoded as they arrive: the round is over when every
    // variant has one (the worker then waits for the next request).
    std::size_t scanned = 0, reported = 0;
    process_->out().clear();
    auto done = [&](const std::string& out) {
      for (std::size_t end; (end = out.find('\n', scanned)) != std::string::npos;
           scanned = end + 1) {
        auto r = decode_bench_result(std::string_view(out).substr(scanned, end - scanned));
        if (r && wanted.erase(r->id) == 1) {
          results[r->id] = std::move(*r);
          ++reported;
        }
      }
      return wanted.empty();
    };
    const auto ended =
        process_->converse(frame_bench_request(pending), /*close_input=*/false, done,
                           WorkerProcess::Clock::now() + runner_.limits().wall_clock, stop);
    if (ended == WorkerProcess::Ended::kDone) {
      round.all_reported = true;
      return round;
    }
    done(process_->out());
    const bool cancelled = ended == WorkerProcess::Ended::kCancelled;
    const bool timed_out = ended == WorkerProcess::Ended::kTimedOut;
    const WorkerProcess::Exit exit = process_->finish(/*kill=*/cancelled || timed_out);
    const std::string errors = process_->errors();
    process_.reset();
    if (wanted.empty()) {
      round.all_reported = true; // it answered everything, then exited
      return round;
    }
    round.fatal = cancelled;
    // No blame when the worker stopped on purpose after a result (a GPU
    // worker after a failed variant), or when a worker kept from an earlier
    // round was found gone before it answered anything.
    const bool stopped_on_purpose =
        WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == kBenchRestartExit && reported > 0;
    round.blame_none =
        !cancelled && !timed_out && (stopped_on_purpose || (!fresh && reported == 0));
    round.why =
        cancelled   ? "the job was cancelled"
        : timed_out ? "exceeded the wall-clock limit of " +
                          std::to_string(runner_.limits().wall_clock.count()) + " ms"
        : WIFSIGNALED(exit.status)
            ? std::string("crashed with signal ") + ::strsignal(WTERMSIG(exit.status))
            : "the bench worker exited with status " + std::to_string(WEXITSTATUS(exit.status));
    if (!errors.empty()) {
      round.why += ": " + log_tail(clean_log(errors), 400);
    }
    return round;
  }

  const WorkerRunner& runner_;
  std::unique_ptr<WorkerProcess> process_;
  int started_ = 0;
};

} // namespace

std::unique_ptr<BenchSession> WorkerRunner::open_bench() const {
  return std::make_unique<BenchWorker>(*this);
}

} // namespace kcache::compiler
