#include "kcached_process.h"

#include "process.h"
#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kcache::testing {

std::string built_binary(const std::string& name) {
  // KCACHE_BUILD_DIR is compiled in: the build tree these tests belong to.
  const std::string dir = KCACHE_BUILD_DIR;
  if (name == "kcached") {
    // The soak runs a release kcached this way (the tests are built with ASan).
    const char* env = std::getenv("KCACHE_KCACHED_BINARY");
    return env != nullptr && *env != '\0' ? env : dir + "/service/kcached";
  }
  if (name == "kcache-worker") {
    return dir + "/compiler/kcache-worker";
  }
  if (name == "crashing_worker") {
    return dir + "/tests/compiler/crashing_worker";
  }
  return dir + "/client/" + name;
}

KcachedProcess::KcachedProcess(std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  start();
}

KcachedProcess::~KcachedProcess() {
  kill();
}

void KcachedProcess::start() {
  const std::string port_file = (dir_.path() / "port").string();
  std::remove(port_file.c_str());
  const std::string binary = built_binary("kcached");
  std::vector<std::string> args = {
      binary,        "--listen",    "127.0.0.1:0",   "--data-dir",  (dir_.path() / "data").string(),
      "--port-file", port_file,     "--unix-socket", unix_socket(), "--threads",
      "4",           "--log-level", "info"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = spawn_logged(args, (dir_.path() / "kcached.log").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    std::ifstream in(port_file);
    if (in >> port_ && port_ > 0) {
      break;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("kcached exited at start:\n" + log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill();
      throw std::runtime_error("kcached did not start:\n" + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void KcachedProcess::kill() {
  kill_and_reap(pid_);
}

int KcachedProcess::terminate() {
  int status = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string KcachedProcess::log() const {
  std::ifstream in(dir_.path() / "kcached.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string raw_exchange(int port, const std::string& bytes, int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) {
      close(fd);
    }
    return "";
  }
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      break;
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) {
      continue;
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

int run_command(const std::vector<std::string>& argv_in, std::string& out,
                const std::vector<std::string>& env) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    return -1;
  }
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    env_strings.emplace_back(*e);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return -1;
  }
  char buf[4096];
  ssize_t n = 0;
  out.clear();
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace kcache::testing
