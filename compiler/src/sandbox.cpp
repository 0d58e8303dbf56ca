#include <kcache/compiler/sandbox.h>

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kcache::compiler {
namespace {

// Debian 12's kernel headers stop at ABI 2; newer kernels handle these too,
// and an unhandled right is an allowed one (truncate(2) of any file, say).
constexpr std::uint64_t kTruncate = 1ULL << 14; // ABI 3
constexpr std::uint64_t kIoctlDev = 1ULL << 15; // ABI 5

constexpr std::uint64_t kReadFile = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE;
constexpr std::uint64_t kReadDir = kReadFile | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr std::uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                      LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

std::uint64_t handled_rights(int abi) {
  std::uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; // ABI 1: bits 0-12
  if (abi >= 2) {
    rights |= LANDLOCK_ACCESS_FS_REFER;
  }
  if (abi >= 3) {
    rights |= kTruncate;
  }
  if (abi >= 5) {
    rights |= kIoctlDev;
  }
  return rights;
}

// glibc has no wrappers for the Landlock system calls (and Debian packages no
// liblandlock), so they are called directly, as the kernel's own sample does.
// struct landlock_ruleset_attr as kernels 6.12 and later define it: Debian
// 12's headers (6.1) stop at its first field. The kernel takes a prefix of
// it, sized for the ABI in use.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net; // ABI 4
  std::uint64_t scoped;             // ABI 6
};
constexpr std::uint64_t kAccessNetBindTcp = 1ULL << 0;
constexpr std::uint64_t kAccessNetConnectTcp = 1ULL << 1;
constexpr std::uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
constexpr std::uint64_t kScopeSignal = 1ULL << 1;

long create_ruleset(const RulesetAttr* attr, std::size_t size, std::uint32_t flags) {
  return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
}

long add_rule(int ruleset, const landlock_path_beneath_attr& rule) {
  return ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U);
}

long restrict_self(int ruleset) {
  return ::syscall(SYS_landlock_restrict_self, ruleset, 0U);
}

class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

private:
  int fd_;
};

// Allows `rights` beneath `path` (a file gets only the file rights). A path
// that does not exist is no error: there is nothing there to read.
tl::expected<void, std::string> allow(int ruleset, const std::string& path, std::uint64_t rights,
                                      std::uint64_t handled) {
  const Fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (fd.get() < 0) {
    return {};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return {};
  }
  if (!S_ISDIR(st.st_mode)) {
    rights &= kFileRights;
  }
  const landlock_path_beneath_attr rule{rights & handled, fd.get()};
  if (add_rule(ruleset, rule) != 0) {
    return tl::unexpected("landlock_add_rule(" + path + "): " + std::strerror(errno));
  }
  return {};
}

} // namespace

std::vector<std::string> system_read_paths() {
  return {"/usr",
          "/lib",
          "/lib64",
          "/etc/ld.so.cache",
          "/etc/os-release",
          "/etc/lsb-release",
          "/etc/debian_version",
          "/etc/localtime",
          "/proc/self",
          "/dev/urandom",
          "/dev/zero"};
}

tl::expected<int, std::string> landlock_abi() {
  const long abi = create_ruleset(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 0) {
    return tl::unexpected(std::string("this kernel offers no Landlock (") + std::strerror(errno) +
                          ")");
  }
  return static_cast<int>(abi);
}

tl::expected<int, std::string> confine_filesystem(const SandboxPolicy& policy) {
  auto abi = landlock_abi();
  if (!abi) {
    return tl::unexpected(abi.error());
  }
  const std::uint64_t handled = handled_rights(*abi);
  RulesetAttr attr{handled, 0, 0};
  std::size_t attr_size = sizeof attr.handled_access_fs; // what ABI 1-3 take
  if (policy.isolate && *abi >= 4) {
    attr.handled_access_net = kAccessNetBindTcp | kAccessNetConnectTcp; // and no rule allows any
    attr_size = offsetof(RulesetAttr, scoped);
  }
  if (policy.isolate && *abi >= 6) {
    attr.scoped = kScopeAbstractUnixSocket | kScopeSignal;
    attr_size = sizeof attr;
  }
  const Fd ruleset(static_cast<int>(create_ruleset(&attr, attr_size, 0)));
  if (ruleset.get() < 0) {
    return tl::unexpected(std::string("landlock_create_ruleset: ") + std::strerror(errno));
  }
  for (const std::string& path : policy.read_paths) {
    if (auto ok = allow(ruleset.get(), path, kReadDir, handled); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  for (const std::string& path : policy.write_paths) {
    if (auto ok = allow(ruleset.get(), path, handled, handled); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  // Required for an unprivileged process to restrict itself.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return tl::unexpected(std::string("PR_SET_NO_NEW_PRIVS: ") + std::strerror(errno));
  }
  if (restrict_self(ruleset.get()) != 0) {
    return tl::unexpected(std::string("landlock_restrict_self: ") + std::strerror(errno));
  }
  return *abi;
}

} // namespace kcache::compiler
