#include <kcache/protocol/build_info.h>

// Generated at configure time (protocol/src/build_version.h.in).
#include "build_version.h"

namespace kcache::protocol {

BuildInfo build_info() {
  return {kBuildVersion, kBuildGitRevision, kBuildKeySchema, kBuildCAbi};
}

std::string version_line(std::string_view program) {
  const BuildInfo info = build_info();
  return std::string(program) + " " + std::string(info.version) + " (git " +
         std::string(info.git_revision) + ", key schema " + std::to_string(info.key_schema) +
         ", C ABI " + std::to_string(info.c_abi) + ")";
}

} // namespace kcache::protocol
