// The worker's Landlock confinement, tested in a child process (it cannot be
// undone): reads outside the allowed paths fail, writes go only to the
// writable directory, and files opened before stay usable.

#include <kcache/compiler/sandbox.h>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kcache::compiler {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a forked child; its exit code (0 = every check held).
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

bool can_open(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
  }
  return fd >= 0;
}

TEST(Sandbox, ConfinesReadsAndWritesToThePolicy) {
  if (auto abi = landlock_abi(); !abi) {
    GTEST_SKIP() << abi.error();
  }
  const fs::path root =
      fs::temp_directory_path() / ("kcache-sandbox-" + std::to_string(::getpid()));
  fs::create_directories(root / "toolchain");
  fs::create_directories(root / "scratch");
  std::ofstream(root / "secret.txt") << "secret";
  std::ofstream(root / "toolchain" / "header.h") << "int x;";
  const int kept = ::open((root / "secret.txt").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(kept, 0);

  const int failed_check = in_child([&] {
    SandboxPolicy policy;
    policy.read_paths = {(root / "toolchain").string(), "/does/not/exist"};
    policy.write_paths = {(root / "scratch").string()};
    if (!confine_filesystem(policy)) {
      return 1;
    }
    if (!can_open(root / "toolchain" / "header.h", O_RDONLY)) {
      return 2; // an allowed read
    }
    if (can_open(root / "secret.txt", O_RDONLY)) {
      return 3; // a host file outside the policy
    }
    if (can_open("/etc/hostname", O_RDONLY)) {
      return 4;
    }
    if (!can_open(root / "scratch" / "out.o", O_WRONLY | O_CREAT)) {
      return 5; // the scratch directory is writable
    }
    if (can_open(root / "planted", O_WRONLY | O_CREAT)) {
      return 6; // nothing else is
    }
    if (can_open(root / "toolchain" / "header.h", O_WRONLY)) {
      return 7; // readable is not writable
    }
    char c = 0;
    if (::pread(kept, &c, 1, 0) != 1 || c != 's') {
      return 8; // descriptors opened before keep working
    }
    return 0;
  });
  ::close(kept);
  EXPECT_EQ(failed_check, 0) << "check " << failed_check << " failed";
  EXPECT_FALSE(fs::exists(root / "planted"));
  EXPECT_TRUE(fs::exists(root / "scratch" / "out.o"));
  fs::remove_all(root);
}

} // namespace
} // namespace kcache::compiler
