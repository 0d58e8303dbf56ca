#pragma once
// The kcache-worker the compiler tests run. scripts/test points
// KCACHE_WORKER_BINARY at a release one: an ASan worker cannot run under
// RLIMIT_AS, so the memory-limit tests need an uninstrumented worker. Without
// the variable, the build's own worker (KCACHE_WORKER_BINARY, the macro).

#include <cstdlib>
#include <string>

namespace kcache::testing {

inline std::string worker_binary() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env != nullptr && *env != '\0' ? env : KCACHE_WORKER_BINARY;
}

// Whether that worker carries ASan (its address space is then unlimited).
inline bool worker_is_instrumented() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env == nullptr || *env == '\0' ? KCACHE_SANITIZED != 0 : false;
}

} // namespace kcache::testing
