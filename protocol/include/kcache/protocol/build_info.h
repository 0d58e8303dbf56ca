#pragma once
// What a binary was built from, for `--version`, /v1/stats and the
// build_info metric: one answer for kcached, kcache and libkcache.

#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::protocol {

struct BuildInfo {
  std::string_view version;      // CMake's PROJECT_VERSION, "0.1.0"
  std::string_view git_revision; // `git describe --always --dirty` at configure time; "unknown"
  std::uint32_t key_schema = 0;  // cachekey::kKeySchemaVersion
  std::uint32_t c_abi = 0;       // KCACHE_ABI_VERSION (kcache/kcache.h)
};

BuildInfo build_info();

// "kcached 0.1.0 (git abc1234, key schema 2, C ABI 8)": what --version prints.
std::string version_line(std::string_view program);

} // namespace kcache::protocol
