#pragma once
// Child processes for tests and benchmarks.

#include <sys/types.h>

#include <string>
#include <vector>

namespace kcache::testing {

// Starts args[0] with args, stdout and stderr appended to log_path. Throws
// std::runtime_error if it cannot be started.
pid_t spawn_logged(const std::vector<std::string>& args, const std::string& log_path);

// SIGKILL (after SIGCONT, in case it was stopped) and reap; sets pid to -1.
void kill_and_reap(pid_t& pid);

} // namespace kcache::testing
