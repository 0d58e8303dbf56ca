#pragma once
// What reliability tests read about a process's memory, and whether this build
// runs under AddressSanitizer (whose shadow and quarantine hold freed memory,
// so RSS bounds are looser there).

#include <sys/types.h>

#include <fstream>
#include <string>

namespace kcache::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// Whether the running process `pid` has the ASan runtime mapped (a test may
// run a release kcached though it is built with ASan itself).
inline bool runs_sanitized(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("libasan") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// Resident set size of `pid` in MiB (VmRSS), or -1 if it cannot be read.
inline double rss_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stod(line.substr(6)) / 1024.0;
    }
  }
  return -1;
}

} // namespace kcache::testing
