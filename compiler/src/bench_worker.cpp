// WorkerRunner::open_bench: a search's rounds in one kcache-worker --bench
// process, for as long as it lives. A worker that crashes or hangs costs the
// variant it was running (the results stream in order, one line each, so the
// first unreported variant is the one) and the rest go on in a fresh worker.

#include "worker_process.h"

#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/worker_runner.h>

#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace kcache::compiler {
namespace {

class BenchWorker final : public BenchSession {
public:
  BenchWorker(const WorkerRunner& runner, const std::vector<int>& gpus) : runner_(runner) {
    for (int gpu : gpus) {
      lanes_.push_back(Lane{{"--bench", "--gpu", std::to_string(gpu)}, nullptr});
    }
    if (lanes_.empty()) {
      lanes_.push_back(Lane{{"--bench"}, nullptr});
    }
  }

  // A GPU round is dealt out over the lanes (variant i to lane i mod n), each
  // a worker on a GPU of its own, timed at once; CPU rounds use the first.
  std::vector<BenchResult> bench(const BenchRequest& request,
                                 const std::stop_token& stop) override {
    // A round checking outputs (halving's finalists, a winner's check) runs on
    // one GPU: the variants it decides between are compared on one device,
    // not across the few percent two GPUs of a class may differ by.
    const std::size_t n = request.device == "cuda" && !finalists(request)
                              ? std::min(lanes_.size(), request.variants.size())
                              : 1;
    if (n <= 1) {
      return run_lane(lanes_.front(), request, stop);
    }
    std::vector<BenchRequest> parts(n, request);
    for (BenchRequest& part : parts) {
      part.variants.clear();
    }
    for (std::size_t i = 0; i < request.variants.size(); ++i) {
      parts[i % n].variants.push_back(request.variants[i]);
    }
    // Workers are started here, on the search's own thread, not on the
    // round's threads below: PR_SET_PDEATHSIG kills a child when the thread
    // that forked it ends. One started there (after a crash) lasts that
    // round; a lane whose worker is gone gets a new one here.
    for (std::size_t lane = 0; lane < n; ++lane) {
      if (lanes_[lane].process && !lanes_[lane].process->running()) {
        lanes_[lane].process.reset();
      }
      if (!lanes_[lane].process) {
        (void)start(lanes_[lane], /*gpu=*/true); // a failure is said by run_lane's own start
      }
    }
    std::vector<std::vector<BenchResult>> answers(n);
    {
      std::vector<std::jthread> threads;
      for (std::size_t lane = 0; lane < n; ++lane) {
        threads.emplace_back(
            [&, lane] { answers[lane] = run_lane(lanes_[lane], parts[lane], stop); });
      }
    }
    std::vector<BenchResult> out;
    out.reserve(request.variants.size());
    for (std::size_t i = 0; i < request.variants.size(); ++i) {
      out.push_back(std::move(answers[i % n][i / n])); // run_lane answers in its order
    }
    return out;
  }

  int workers_started() const override { return started_; }

private:
  // Few enough variants that one GPU decides between them.
  bool finalists(const BenchRequest& request) const {
    return request.variants.size() <= 2 * lanes_.size() && request.check;
  }

  struct Lane {
    std::vector<std::string> args; // kcache-worker's: which GPU it times on
    std::unique_ptr<WorkerProcess> process;
    int served = 0; // requests sent to this process
  };

  tl::expected<void, std::string> start(Lane& lane, bool gpu) {
    // No address-space limit on a GPU bench: the CUDA driver reserves
    // virtual address space for unified addressing far beyond any RLIMIT_AS
    // a worker gets (cuInit fails under one). Its host memory stays bounded:
    // the benchmark's buffers are capped at 4 GiB (bench_inputs.cpp).
    const WorkerLimits& limits = runner_.limits();
    auto spawned = WorkerProcess::spawn(
        runner_.binary(), lane.args,
        SpawnLimits{limits.cpu_time, gpu ? 0 : limits.memory_bytes, /*renewable_cpu_time=*/true});
    if (!spawned) {
      return tl::unexpected(spawned.error());
    }
    lane.process = std::move(*spawned);
    lane.served = 0;
    ++started_;
    return {};
  }

  std::vector<BenchResult> run_lane(Lane& lane, const BenchRequest& request,
                                    const std::stop_token& stop) {
    std::map<std::string, BenchResult> results;
    BenchRequest pending = request;
    while (!pending.variants.empty()) {
      const Round round = run_round(lane, pending, stop, results);
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

  struct Round {
    bool all_reported = false;
    bool blame_none = false; // the rest go on in a fresh worker, none blamed
    bool fatal = false;      // cancelled, or no worker: the rest all fail
    std::string why;         // how the worker ended
  };

  Round run_round(Lane& lane, const BenchRequest& pending, const std::stop_token& stop,
                  std::map<std::string, BenchResult>& results) {
    std::unique_ptr<WorkerProcess>& process = lane.process;
    Round round;
    if (!process) {
      if (auto started = start(lane, pending.device == "cuda"); !started) {
        round.fatal = true;
        round.why = started.error();
        return round;
      }
    }
    // A worker that has answered before may have gone since (see bench).
    const bool fresh = lane.served == 0;
    if (!fresh) {
      process->extend_cpu_limit(runner_.limits().cpu_time);
    }
    ++lane.served;
    std::set<std::string> wanted;
    for (const BenchVariant& v : pending.variants) {
      wanted.insert(v.id);
    }
    // Results are decoded as they arrive: the round is over when every
    // variant has one (the worker then waits for the next request).
    std::size_t scanned = 0, reported = 0;
    process->out().clear();
    const std::size_t errors_from = process->errors().size();
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
        process->converse(frame_bench_request(pending), /*close_input=*/false, done,
                          WorkerProcess::Clock::now() + runner_.limits().wall_clock, stop);
    if (ended == WorkerProcess::Ended::kDone) {
      round.all_reported = true;
      return round;
    }
    const bool cancelled = ended == WorkerProcess::Ended::kCancelled;
    const bool timed_out = ended == WorkerProcess::Ended::kTimedOut;
    const WorkerProcess::Exit exit = process->finish(/*kill=*/cancelled || timed_out);
    done(process->out()); // what the last reads brought
    // This round's stderr only: a worker kept from earlier rounds has more.
    const std::string errors =
        process->errors().substr(std::min(errors_from, process->errors().size()));
    process.reset();
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
  std::vector<Lane> lanes_;
  std::atomic<int> started_ = 0;
};

} // namespace

std::unique_ptr<BenchSession> WorkerRunner::open_bench(const std::vector<int>& gpus) const {
  return std::make_unique<BenchWorker>(*this, gpus);
}

} // namespace kcache::compiler
