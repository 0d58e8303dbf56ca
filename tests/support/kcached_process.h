#pragma once
// A real kcached, started from the build tree with a temporary data dir on a
// free port; killed in the destructor. kill() (SIGKILL), terminate() (SIGTERM,
// waits for the drain) and start() again let tests take it away and bring it
// back on the same data dir.

#include "temp_dir.h"

#include <sys/types.h>

#include <string>
#include <vector>

namespace kcache::testing {

class KcachedProcess {
public:
  explicit KcachedProcess(std::vector<std::string> extra_args = {});
  ~KcachedProcess();
  KcachedProcess(const KcachedProcess&) = delete;
  KcachedProcess& operator=(const KcachedProcess&) = delete;

  void start();
  void kill();
  // SIGTERM; returns the exit status.
  int terminate();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string unix_socket() const { return (dir_.path() / "kcached.sock").string(); }
  const TempDir& dir() const { return dir_; }
  std::string log() const;

private:
  TempDir dir_;
  std::vector<std::string> extra_args_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// The path of a binary built next to the tests (kcached, kcache, kcache-worker,
// crashing_worker); KCACHE_KCACHED_BINARY, when set, names the kcached to run.
std::string built_binary(const std::string& name);

// Sends raw bytes on a fresh TCP connection and returns whatever comes back
// within the timeout (for malformed-request tests).
std::string raw_exchange(int port, const std::string& bytes, int timeout_ms = 2000);

// Runs a command, capturing stdout; returns the exit status.
int run_command(const std::vector<std::string>& argv, std::string& out,
                const std::vector<std::string>& env = {});

} // namespace kcache::testing
