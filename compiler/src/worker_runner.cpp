#include "worker_process.h"

#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/worker_runner.h>

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

namespace kcache::compiler {
namespace {

using Clock = std::chrono::steady_clock;

WorkerOutcome failure(WorkerExit exit, CompileError::Code code, std::string message,
                      std::string log = {}) {
  return WorkerOutcome{
      tl::unexpected(CompileError{code, std::move(message), std::move(log)}), {}, exit};
}

// What of a worker's stderr a job's log keeps.
constexpr std::size_t kStderrTail = 4096;

// The cleaned end of a worker's stderr (log_tail does the cutting).
std::string stderr_tail(const std::string& s, std::size_t n = kStderrTail) {
  return log_tail(clean_log(s), n);
}

// A fresh directory for one compile, removed with everything in it.
class ScratchDir {
public:
  ScratchDir() {
    std::error_code ec;
    std::string pattern =
        (std::filesystem::temp_directory_path(ec) / "kcache-worker-XXXXXX").string();
    if (!ec && ::mkdtemp(pattern.data()) != nullptr) {
      path_ = std::move(pattern);
    }
  }
  ~ScratchDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

// Questions to the worker (--toolchains, --host-target) are not compiles:
// whatever a job's limit, they get two minutes (the fingerprint walks the
// system include trees).
constexpr std::chrono::milliseconds kQueryTime = std::chrono::minutes(2);

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

} // namespace

struct WorkerRunner::Exchange {
  bool started = false;
  std::string start_error;
  std::string reply, errors;
  int status = 0;
  std::uint64_t peak_rss = 0;
  double cpu_seconds = 0;    // user + system
  Clock::duration elapsed{}; // fork to reaped
  bool timed_out = false;
  bool cancelled = false;
};

WorkerRunner::Exchange WorkerRunner::exchange(const std::vector<std::string>& args,
                                              const std::string& input, const std::stop_token& stop,
                                              bool limit_memory,
                                              std::chrono::milliseconds wall_clock) const {
  Exchange x;
  auto process = WorkerProcess::spawn(worker_binary_, args, spawn_limits(limit_memory));
  if (!process) {
    x.start_error = process.error();
    return x;
  }
  x.started = true;
  const auto ended =
      (*process)->converse(input, /*close_input=*/true, {}, Clock::now() + wall_clock, stop);
  x.timed_out = ended == WorkerProcess::Ended::kTimedOut;
  x.cancelled = ended == WorkerProcess::Ended::kCancelled;
  const WorkerProcess::Exit exit = (*process)->finish(/*kill=*/x.timed_out || x.cancelled);
  x.reply = std::move((*process)->out());
  x.errors = (*process)->errors();
  x.status = exit.status;
  x.peak_rss = exit.peak_rss;
  x.cpu_seconds = exit.cpu_seconds;
  x.elapsed = exit.elapsed;
  return x;
}

SpawnLimits WorkerRunner::spawn_limits(bool limit_memory) const {
  return SpawnLimits{limits_.cpu_time, limit_memory ? limits_.memory_bytes : 0};
}

// Which limit ended a compile, if one did. Under RLIMIT_AS an allocation
// fails: the compiler says so on stderr (ptxas "Memory allocation failure",
// "LLVM ERROR: out of memory"), throws std::bad_alloc (the worker answers
// kResourceLimit), or dies by a signal with its peak RSS near the limit.
std::optional<WorkerRunner::Limit> WorkerRunner::limit_hit(const Exchange& x,
                                                           const CompileOutcome* reply) const {
  if (x.timed_out) {
    return Limit::kWallClock;
  }
  if (WIFSIGNALED(x.status)) {
    // Past the soft RLIMIT_CPU comes SIGXCPU, past the hard one SIGKILL.
    const int sig = WTERMSIG(x.status);
    if (sig == SIGXCPU ||
        (sig == SIGKILL && x.cpu_seconds >= static_cast<double>(limits_.cpu_time.count()))) {
      return Limit::kCpuTime;
    }
  }
  if (reply != nullptr && !*reply && reply->error().code == CompileError::Code::kResourceLimit) {
    return Limit::kMemory;
  }
  const bool failed = reply == nullptr || !*reply;
  const bool near_memory_limit = limits_.memory_bytes > 0 && x.peak_rss * 2 >= limits_.memory_bytes;
  if (failed && (!out_of_memory_line(x.errors).empty() ||
                 (reply == nullptr && WIFSIGNALED(x.status) && near_memory_limit))) {
    return Limit::kMemory;
  }
  return std::nullopt;
}

CompileError WorkerRunner::limit_error(Limit limit, const Exchange& x, std::string_view why,
                                       const std::string& log) const {
  std::string message = "the compile hit the ";
  switch (limit) {
  case Limit::kMemory:
    message += limits_.memory_bytes > 0
                   ? "memory limit of " + mib(limits_.memory_bytes) + " of address space"
                   : "memory of this host (no worker memory limit is set)";
    break;
  case Limit::kCpuTime:
    message += "CPU-time limit of " + std::to_string(limits_.cpu_time.count()) + " s";
    break;
  case Limit::kWallClock:
    message +=
        "wall-clock limit of " + std::to_string(limits_.wall_clock.count()) + " ms and was killed";
    break;
  }
  message += " (peak RSS " + mib(x.peak_rss) + ", CPU " + seconds_text(x.cpu_seconds) + ", " +
             seconds_text(std::chrono::duration<double>(x.elapsed).count()) + " elapsed";
  if (WIFSIGNALED(x.status)) {
    message += std::string(", ended by ") + ::strsignal(WTERMSIG(x.status));
  }
  message += ")";
  if (!why.empty()) {
    message += ": " + std::string(why);
  }
  return CompileError{CompileError::Code::kResourceLimit, std::move(message), clean_log(log)};
}

WorkerOutcome WorkerRunner::run(const CompileSpec& spec, const std::stop_token& stop) const {
  // The worker compiles in a directory the runner removes, even when a
  // compiler crash or a kill leaves it behind.
  const ScratchDir scratch;
  std::vector<std::string> args;
  if (!scratch.path().empty()) {
    args = {"--scratch", scratch.path()};
  }
  Exchange x = exchange(args, spec_to_json(spec), stop, /*limit_memory=*/true, limits_.wall_clock);
  if (!x.started) {
    return failure(WorkerExit::kSpawnFailed, CompileError::Code::kInternal, x.start_error);
  }
  if (x.cancelled) {
    return failure(WorkerExit::kCancelled, CompileError::Code::kCancelled, "the job was cancelled");
  }
  const int status = x.status;
  const bool replied = !x.reply.empty() && !x.timed_out && WIFEXITED(status);
  WorkerOutcome decoded =
      replied ? decode_worker_outcome(x.reply)
              : failure(WorkerExit::kProtocolError, CompileError::Code::kInternal, "no reply");
  if (const auto limit = limit_hit(x, replied ? &decoded.outcome : nullptr)) {
    // The compiler's own log (e.g. "Ptx assembly aborted due to errors"), then
    // the stderr that says why.
    const CompileError* said = replied && !decoded.outcome ? &decoded.outcome.error() : nullptr;
    std::string why = *limit == Limit::kMemory ? out_of_memory_line(x.errors) : std::string();
    if (why.empty() && said != nullptr && said->code == CompileError::Code::kResourceLimit) {
      why = said->message; // the worker caught std::bad_alloc
    }
    std::string log = said != nullptr ? said->log : std::string();
    if (!x.errors.empty()) {
      log += (log.empty() ? "" : "\n") + std::string("kcache-worker stderr:\n") +
             stderr_tail(x.errors);
    }
    decoded.outcome = tl::unexpected(limit_error(*limit, x, why, log));
    decoded.exit = *limit == Limit::kMemory ? WorkerExit::kMemoryLimit : WorkerExit::kTimedOut;
    return decoded;
  }
  if (WIFSIGNALED(status)) {
    return failure(WorkerExit::kKilledBySignal, CompileError::Code::kCompileFailed,
                   std::string("kcache-worker crashed with signal ") +
                       ::strsignal(WTERMSIG(status)),
                   stderr_tail(x.errors));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && x.reply.empty()) {
    return failure(WorkerExit::kExecFailed, CompileError::Code::kUnavailable,
                   "cannot run " + worker_binary_, stderr_tail(x.errors));
  }
  if (x.reply.empty()) {
    return failure(WorkerExit::kProtocolError, CompileError::Code::kCompileFailed,
                   "kcache-worker exited with status " + std::to_string(WEXITSTATUS(status)) +
                       " without a reply",
                   stderr_tail(x.errors));
  }
  if (!decoded.outcome) {
    // What the compiler printed past its log (a crash's last words, a
    // toolkit warning) belongs with the error; the worker cleaned its log
    // already, but a daemon does not trust its workers' bytes.
    CompileError& e = decoded.outcome.error();
    if (!x.errors.empty()) {
      e.log += (e.log.empty() ? "" : "\n") + std::string("kcache-worker stderr:\n") +
               stderr_tail(x.errors);
    }
    e = tidy_error(std::move(e));
  }
  return decoded;
}

std::vector<BenchResult> WorkerRunner::bench(const BenchRequest& request,
                                             const std::stop_token& stop) const {
  return open_bench()->bench(request, stop);
}

tl::expected<Toolchains, std::string> WorkerRunner::toolchains() const {
  // No address-space limit: a sanitized worker reserves terabytes of shadow
  // memory just to start, and printing versions needs no bound.
  Exchange x = exchange({"--toolchains"}, {}, {}, /*limit_memory=*/false, kQueryTime);
  if (!x.started) {
    return tl::unexpected(x.start_error);
  }
  if (x.timed_out || !WIFEXITED(x.status) || WEXITSTATUS(x.status) != 0) {
    return tl::unexpected("cannot run " + worker_binary_ +
                          " --toolchains: " + stderr_tail(x.errors, 400));
  }
  return decode_toolchains(x.reply);
}

tl::expected<std::string, std::string> WorkerRunner::sandbox() const {
  Exchange x = exchange({"--sandbox"}, {}, {}, /*limit_memory=*/false, kQueryTime);
  if (!x.started) {
    return tl::unexpected(x.start_error);
  }
  std::string said = x.reply;
  while (!said.empty() && said.back() == '\n') {
    said.pop_back();
  }
  if (x.timed_out || !WIFEXITED(x.status) || WEXITSTATUS(x.status) != 0) {
    return tl::unexpected(said.empty() ? stderr_tail(x.errors, 400) : said);
  }
  return said;
}

tl::expected<HostTarget, std::string> WorkerRunner::host_target() const {
  Exchange x = exchange({"--host-target"}, {}, {}, /*limit_memory=*/false, kQueryTime);
  if (!x.started) {
    return tl::unexpected(x.start_error);
  }
  if (x.timed_out || !WIFEXITED(x.status) || WEXITSTATUS(x.status) != 0) {
    return tl::unexpected("cannot run " + worker_binary_ +
                          " --host-target: " + stderr_tail(x.errors, 400));
  }
  return decode_host_target(x.reply);
}

} // namespace kcache::compiler
