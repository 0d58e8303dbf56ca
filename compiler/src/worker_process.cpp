#include "worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

namespace kcache::compiler {
namespace {

// What the process holds of a worker's stderr.
constexpr std::size_t kMaxStderr = 1 << 20;

struct Channel {
  UniqueFd read, write;
};

bool make_pipe(Channel& c) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return false;
  }
  c.read.reset(fds[0]);
  c.write.reset(fds[1]);
  return true;
}

// The worker's stdin is a socket, not a pipe: writing to a worker that died
// before reading its request then fails with EPIPE (send with MSG_NOSIGNAL)
// instead of raising SIGPIPE, which would kill the calling daemon.
bool make_input_channel(Channel& c) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return false;
  }
  c.read.reset(fds[0]);
  c.write.reset(fds[1]);
  return true;
}

// CPU time a process has used (user + system), from /proc/PID/stat.
std::optional<double> cpu_seconds_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces: fields are counted after its ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14) {
      utime = std::strtoull(field.c_str(), nullptr, 10);
    } else if (i == 15) {
      stime = std::strtoull(field.c_str(), nullptr, 10);
      const long ticks = ::sysconf(_SC_CLK_TCK);
      return static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
    }
  }
  return std::nullopt;
}

} // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

tl::expected<std::unique_ptr<WorkerProcess>, std::string>
WorkerProcess::spawn(const std::string& binary, const std::vector<std::string>& args,
                     const SpawnLimits& limits) {
  Channel in, out, err;
  if (!make_input_channel(in) || !make_pipe(out) || !make_pipe(err)) {
    return tl::unexpected(std::string("pipe: ") + std::strerror(errno));
  }
  // Everything the child needs is prepared before fork: after it, in a
  // multithreaded parent, only async-signal-safe calls are allowed.
  rlimit inherited{};
  ::getrlimit(RLIMIT_CPU, &inherited);
  // A renewable limit keeps the hard limit kcached has (raising one takes a
  // privilege; systemd's LimitCPU= or a container's ulimit may have set it).
  const auto soft = std::min(static_cast<rlim_t>(limits.cpu_time.count()), inherited.rlim_max);
  const rlimit cpu{soft, limits.renewable_cpu_time ? inherited.rlim_max
                                                   : std::min(soft + 1, inherited.rlim_max)};
  const rlimit memory{static_cast<rlim_t>(limits.memory_bytes),
                      static_cast<rlim_t>(limits.memory_bytes)};
  std::vector<std::string> storage = {binary};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (std::string& a : storage) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);

  std::unique_ptr<WorkerProcess> p(new WorkerProcess()); // private constructor
  p->started_ = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return tl::unexpected(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // A worker never outlives the daemon (kill -9 included): its job is
    // journaled and runs again after the restart.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (memory.rlim_cur > 0) {
      ::setrlimit(RLIMIT_AS, &memory);
    }
    ::dup2(in.read.get(), STDIN_FILENO);
    ::dup2(out.write.get(), STDOUT_FILENO);
    ::dup2(err.write.get(), STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  p->pid_ = pid;
  p->in_ = std::move(in.write);
  p->stdout_ = std::move(out.read);
  p->stderr_ = std::move(err.read);
  ::fcntl(p->in_.get(), F_SETFL, O_NONBLOCK);
  return p;
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0) {
    finish(/*kill=*/true);
  }
}

WorkerProcess::Ended WorkerProcess::converse(std::string_view input, bool close_input,
                                             const std::function<bool(const std::string&)>& done,
                                             Clock::time_point deadline,
                                             const std::stop_token& stop) {
  std::size_t written = 0;
  auto input_sent = [&] {
    if (close_input) {
      in_.reset(); // EOF: the worker starts
    }
  };
  if (input.empty()) {
    input_sent();
  }
  // Feed the input and drain both outputs together: either side may block.
  while (stdout_.get() >= 0 || stderr_.get() >= 0) {
    if (done && done(out_)) {
      return Ended::kDone;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Ended::kTimedOut;
    }
    if (stop.stop_requested()) {
      return Ended::kCancelled;
    }
    const bool sending = in_.get() >= 0 && written < input.size();
    pollfd fds[3] = {{stdout_.get(), POLLIN, 0},
                     {stderr_.get(), POLLIN, 0},
                     {sending ? in_.get() : -1, POLLOUT, 0}};
    // Short polls: a cancel is noticed within 50 ms.
    if (::poll(fds, 3, static_cast<int>(std::min<std::int64_t>(left.count(), 50))) < 0 &&
        errno != EINTR) {
      break;
    }
    if (sending && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t n = ::send(in_.get(), input.data() + written, input.size() - written,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
      }
      if (n < 0 && errno != EAGAIN) {
        in_.reset(); // the worker is gone; its exit status will say why
      }
      if (written == input.size()) {
        input_sent();
      }
    }
    for (auto [fd, sink, p] :
         {std::tuple{&stdout_, &out_, &fds[0]}, std::tuple{&stderr_, &errors_, &fds[1]}}) {
      if (fd->get() >= 0 && (p->revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buffer[65536];
        const ssize_t n = ::read(fd->get(), buffer, sizeof buffer);
        if (n > 0) {
          sink->append(buffer, static_cast<std::size_t>(n));
          if (sink == &errors_ && errors_.size() > kMaxStderr) {
            errors_.erase(0, errors_.size() - kMaxStderr / 2); // a runaway writer
          }
        } else if (n == 0 || errno != EAGAIN) {
          fd->reset();
        }
      }
    }
  }
  return done && done(out_) ? Ended::kDone : Ended::kEof;
}

bool WorkerProcess::running() const {
  if (pid_ <= 0) {
    return false;
  }
  siginfo_t info{};
  // WNOWAIT: look, and leave the exit status for finish() to reap.
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

void WorkerProcess::extend_cpu_limit(std::chrono::seconds more) {
  const auto used = cpu_seconds_of(pid_);
  if (!used || pid_ <= 0) {
    return;
  }
  rlimit current{};
  if (::prlimit(pid_, RLIMIT_CPU, nullptr, &current) != 0) {
    return; // it has gone: the next exchange finds out
  }
  const rlimit limit{std::min(static_cast<rlim_t>(*used) + static_cast<rlim_t>(more.count()) + 1,
                              current.rlim_max),
                     current.rlim_max};
  ::prlimit(pid_, RLIMIT_CPU, &limit, nullptr);
}

WorkerProcess::Exit WorkerProcess::finish(bool kill) {
  Exit e;
  if (pid_ <= 0) {
    return e;
  }
  in_.reset(); // EOF: a worker waiting for another request exits
  // Otherwise the worker exits once it has written everything: read what is
  // left so that it cannot block on a full pipe, then give it a moment to
  // exit (a process that closed its outputs may still run) before a kill.
  if (!kill) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    kill = converse({}, true, {}, deadline, {}) != Ended::kEof;
    while (!kill && running()) {
      if (Clock::now() > deadline) {
        kill = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (kill) {
    ::kill(pid_, SIGKILL);
  }
  rusage usage{};
  while (::wait4(pid_, &e.status, 0, &usage) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  stdout_.reset();
  stderr_.reset();
  e.elapsed = Clock::now() - started_;
  e.peak_rss = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  e.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return e;
}

} // namespace kcache::compiler
