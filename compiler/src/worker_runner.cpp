#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/worker_runner.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

namespace kcache::compiler {
namespace {

using Clock = std::chrono::steady_clock;

class Fd {
public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    fd_ = fd;
  }

private:
  int fd_;
};

struct Pipe {
  Fd read, write;
};

bool make_pipe(Pipe& p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return false;
  }
  p.read.reset(fds[0]);
  p.write.reset(fds[1]);
  return true;
}

// The worker's stdin is a socket, not a pipe: writing to a worker that died
// before reading its request then fails with EPIPE (send with MSG_NOSIGNAL)
// instead of raising SIGPIPE, which would kill the calling daemon.
bool make_input_channel(Pipe& p) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return false;
  }
  p.read.reset(fds[0]);
  p.write.reset(fds[1]);
  return true;
}

WorkerOutcome failure(WorkerExit exit, CompileError::Code code, std::string message,
                      std::string log = {}) {
  return WorkerOutcome{
      tl::unexpected(CompileError{code, std::move(message), std::move(log)}), {}, exit};
}

// What the runner holds of a worker's stderr, and what of it a job's log keeps.
constexpr std::size_t kMaxStderr = 1 << 20;
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
  Pipe in, out, err;
  if (!make_input_channel(in) || !make_pipe(out) || !make_pipe(err)) {
    x.start_error = std::string("pipe: ") + std::strerror(errno);
    return x;
  }
  // Everything the child needs is prepared before fork: after it, in a
  // multithreaded parent, only async-signal-safe calls are allowed.
  const rlimit cpu{static_cast<rlim_t>(limits_.cpu_time.count()),
                   static_cast<rlim_t>(limits_.cpu_time.count() + 1)};
  const rlimit memory{static_cast<rlim_t>(limits_.memory_bytes),
                      static_cast<rlim_t>(limits_.memory_bytes)};
  std::vector<std::string> storage = {worker_binary_};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (std::string& a : storage) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);

  const auto started = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    x.start_error = std::string("fork: ") + std::strerror(errno);
    return x;
  }
  if (pid == 0) {
    // A worker never outlives the daemon (kill -9 included): its job is
    // journaled and runs again after the restart.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (limit_memory && memory.rlim_cur > 0) {
      ::setrlimit(RLIMIT_AS, &memory);
    }
    ::dup2(in.read.get(), STDIN_FILENO);
    ::dup2(out.write.get(), STDOUT_FILENO);
    ::dup2(err.write.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  x.started = true;
  in.read.reset();
  out.write.reset();
  err.write.reset();
  ::fcntl(in.write.get(), F_SETFL, O_NONBLOCK);
  if (input.empty()) {
    in.write.reset();
  }

  // Feed the input and drain both outputs together: either side may block.
  std::size_t written = 0;
  const auto deadline = Clock::now() + wall_clock;
  while (out.read.get() >= 0 || err.read.get() >= 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      x.timed_out = true;
      break;
    }
    if (stop.stop_requested()) {
      x.cancelled = true;
      break;
    }
    pollfd fds[3] = {
        {out.read.get(), POLLIN, 0}, {err.read.get(), POLLIN, 0}, {in.write.get(), POLLOUT, 0}};
    // Short polls: a cancel is noticed within 50 ms.
    if (::poll(fds, 3, static_cast<int>(std::min<std::int64_t>(left.count(), 50))) < 0 &&
        errno != EINTR) {
      break;
    }
    if (in.write.get() >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t n = ::send(in.write.get(), input.data() + written, input.size() - written,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
      }
      if (n < 0 && errno != EAGAIN) {
        in.write.reset(); // the worker is gone; its exit status will say why
      }
      if (written == input.size()) {
        in.write.reset(); // EOF: the worker starts compiling
      }
    }
    for (auto [fd, sink] : {std::pair{&out.read, &x.reply}, std::pair{&err.read, &x.errors}}) {
      const pollfd& p = fd == &out.read ? fds[0] : fds[1];
      if (fd->get() >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buffer[65536];
        const ssize_t n = ::read(fd->get(), buffer, sizeof buffer);
        if (n > 0) {
          sink->append(buffer, static_cast<std::size_t>(n));
          if (sink == &x.errors && x.errors.size() > kMaxStderr) {
            x.errors.erase(0, x.errors.size() - kMaxStderr / 2); // a runaway writer
          }
        } else if (n == 0 || errno != EAGAIN) {
          fd->reset();
        }
      }
    }
  }
  if (x.timed_out || x.cancelled) {
    ::kill(pid, SIGKILL);
  }
  rusage usage{};
  while (::wait4(pid, &x.status, 0, &usage) < 0 && errno == EINTR) {
  }
  x.elapsed = Clock::now() - started;
  x.peak_rss = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  x.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return x;
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
  std::map<std::string, BenchResult> results;
  BenchRequest pending = request;
  // No address-space limit on a GPU bench: the CUDA driver reserves virtual
  // address space for unified addressing far beyond any RLIMIT_AS a worker
  // gets (cuInit fails under one). Its host memory stays bounded: the
  // benchmark's buffers are capped at 4 GiB (bench_inputs.cpp).
  const bool limit_memory = request.device != "cuda";
  while (!pending.variants.empty()) {
    Exchange x = exchange({"--bench"}, encode_bench_request(pending), stop, limit_memory,
                          limits_.wall_clock);
    std::size_t reported = 0;
    std::size_t start = 0;
    for (std::size_t end; (end = x.reply.find('\n', start)) != std::string::npos; start = end + 1) {
      auto r = decode_bench_result(std::string_view(x.reply).substr(start, end - start));
      if (r) {
        results[r->id] = std::move(*r);
        ++reported;
      }
    }
    if (reported >= pending.variants.size()) {
      break;
    }
    // The process ended early: the first unreported variant took it down.
    std::string why =
        x.cancelled   ? "the job was cancelled"
        : x.timed_out ? "exceeded the wall-clock limit of " +
                            std::to_string(limits_.wall_clock.count()) + " ms"
        : !x.started ? x.start_error
        : WIFSIGNALED(x.status)
            ? std::string("crashed with signal ") + ::strsignal(WTERMSIG(x.status))
            : "the bench worker exited with status " + std::to_string(WEXITSTATUS(x.status));
    if (!x.errors.empty()) {
      why += ": " + stderr_tail(x.errors, 400);
    }
    std::vector<BenchVariant> rest;
    bool blamed = false;
    for (BenchVariant& v : pending.variants) {
      if (results.contains(v.id)) {
        continue;
      }
      if (!blamed || x.cancelled || !x.started) {
        // The first unreported variant was running when the process ended;
        // after a cancel or a failed start, none of the rest will run either.
        results[v.id] = BenchResult{v.id, "error", 0, 0, 0, why};
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
