// build_info: the numbers CMake reads out of the headers are the headers'
// own, and `kcached --version` prints them on one line.

#include "kcached_process.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/kcache.h>
#include <kcache/protocol/build_info.h>

#include <gtest/gtest.h>

#include <string>

namespace kcache::service {
namespace {

TEST(BuildInfo, NumbersAreTheHeadersOwn) {
  const protocol::BuildInfo info = protocol::build_info();
  EXPECT_EQ(info.key_schema, cachekey::kKeySchemaVersion);
  EXPECT_EQ(info.c_abi, static_cast<std::uint32_t>(KCACHE_ABI_VERSION));
  EXPECT_FALSE(info.version.empty());
  EXPECT_FALSE(info.git_revision.empty());
}

TEST(BuildInfo, KcachedVersionPrintsOneLineOnStdout) {
  std::string out;
  ASSERT_EQ(testing::run_command({testing::built_binary("kcached"), "--version"}, out), 0);
  const protocol::BuildInfo info = protocol::build_info();
  EXPECT_EQ(out, "kcached " + std::string(info.version) + " (git " +
                     std::string(info.git_revision) + ", key schema " +
                     std::to_string(info.key_schema) + ", C ABI " + std::to_string(info.c_abi) +
                     ")\n");
}

} // namespace
} // namespace kcache::service
