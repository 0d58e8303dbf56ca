#pragma once
// A kcache-worker child process: started with the runner's limits, talked to
// over its stdin (a socket, so writing to a dead worker is EPIPE, not
// SIGPIPE in the daemon) and stdout, its stderr kept. Killed and reaped by
// its destructor: a worker never outlives what started it. One conversation
// runs a compile (WorkerRunner::run); several run a search's benchmark rounds
// in one process (BenchWorker).

#include <sys/types.h>
#include <tl/expected.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::compiler {

// A file descriptor, closed with its owner.
class UniqueFd {
public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  void reset(int fd = -1);

private:
  int fd_;
};

struct SpawnLimits {
  std::chrono::seconds cpu_time{120}; // RLIMIT_CPU (SIGXCPU, then SIGKILL a second later)
  std::uint64_t memory_bytes = 0;     // RLIMIT_AS; 0: none
  // A worker kept for several requests gets its CPU limit renewed for each
  // (extend_cpu_limit), under the hard limit kcached itself has: raising a
  // hard limit takes a privilege kcached need not have, so no SIGKILL a
  // second after SIGXCPU here. The caller's wall-clock deadline stays the
  // bound a worker cannot get around.
  bool renewable_cpu_time = false;
};

class WorkerProcess {
public:
  using Clock = std::chrono::steady_clock;

  static tl::expected<std::unique_ptr<WorkerProcess>, std::string>
  spawn(const std::string& binary, const std::vector<std::string>& args, const SpawnLimits& limits);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  enum class Ended {
    kDone,      // `done` said so
    kEof,       // the worker closed its stdout (it exited, or is exiting)
    kTimedOut,  // the deadline passed
    kCancelled, // `stop` was requested
  };
  // Sends `input` (closing stdin after it when `close_input`) while reading
  // stdout into out() and stderr into errors(), until done(out()) holds, the
  // worker closes its stdout, the deadline passes or a stop is requested
  // (noticed within 50 ms).
  Ended converse(std::string_view input, bool close_input,
                 const std::function<bool(const std::string&)>& done, Clock::time_point deadline,
                 const std::stop_token& stop);
  std::string& out() { return out_; }
  const std::string& errors() const { return errors_; }

  // Whether the worker has not exited (it is not reaped here).
  bool running() const;

  // Gives the worker `more` CPU time from what it has used so far: a worker
  // kept for several requests gets each one the CPU limit a fresh worker has
  // (spawned with renewable_cpu_time).
  void extend_cpu_limit(std::chrono::seconds more);

  struct Exit {
    int status = 0;
    std::uint64_t peak_rss = 0;
    double cpu_seconds = 0;    // user + system
    Clock::duration elapsed{}; // spawned to reaped
  };
  // Kills the worker (with SIGKILL) when `kill`, and reaps it.
  Exit finish(bool kill);

private:
  WorkerProcess() = default;

  pid_t pid_ = -1;
  UniqueFd in_, stdout_, stderr_;
  Clock::time_point started_;
  std::string out_, errors_;
};

} // namespace kcache::compiler
