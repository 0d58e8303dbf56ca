#pragma once
// (Library kcache::compiler_backends: kcache-worker only.)
// Confines this process's file access with Landlock, the unprivileged Linux
// security module: from then on it may read (and execute) only under
// `read_paths`, and create, write or remove only under `write_paths`. Files
// already open (stdin, stdout) stay usable. kcache-worker calls it before a
// compile, so no spec can make a compiler read a host file outside the
// toolchain (a secret, kcached's data) or write one, whatever trick gets past
// the spec checks. Not inherited by anything but this process and its
// children, and there is no way back.

#include <tl/expected.hpp>

#include <string>
#include <vector>

namespace kcache::compiler {

struct SandboxPolicy {
  std::vector<std::string> read_paths;  // directories or files; missing ones are skipped
  std::vector<std::string> write_paths; // directories
  // Also deny TCP (bind and connect, Landlock ABI 4) and signals or abstract
  // Unix sockets reaching outside the sandbox (ABI 6), where the kernel has
  // them: for a worker running a spec's own code, which must not reach
  // kcached, Redis or the network, nor signal the daemon.
  bool isolate = false;
};

// What any confined worker may read: the system's libraries and loader
// cache, the release files compilers look at, its own /proc entries and the
// random and zero devices.
std::vector<std::string> system_read_paths();

// The Landlock ABI version this kernel offers, or why there is none.
tl::expected<int, std::string> landlock_abi();

// Returns the ABI version enforced, or why the process could not be confined
// (no Landlock in this kernel, or a rule the kernel refused).
tl::expected<int, std::string> confine_filesystem(const SandboxPolicy& policy);

} // namespace kcache::compiler
