#pragma once
// What the cluster suites need to start several kcached nodes that trust one
// another: the worker binary and one signing key shared by every node.

#include "kcached_process.h"
#include "temp_dir.h"

#include <cstdlib>
#include <string>

namespace kcache::testing {

// scripts/test points KCACHE_WORKER_BINARY at a release worker.
inline std::string worker_binary() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  return env != nullptr && *env != '\0' ? env : built_binary("kcache-worker");
}

// One signing key for every node of a test (made by --print-public-key): each
// node trusts what the others put in Redis.
inline std::string shared_signing_key(const TempDir& dir) {
  std::string key = (dir.path() / "signing.pem").string();
  std::string out;
  run_command({built_binary("kcached"), "--print-public-key", "--signing-key", key, "--data-dir",
               (dir.path() / "unused").string()},
              out);
  return key;
}

} // namespace kcache::testing
