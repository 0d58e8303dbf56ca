// pack_headers against a real kcached with real kcache-worker processes: a
// cpp spec that includes headers through -I DIR is refused at submit; the
// same spec packed compiles into a shared object.

#include "kcached_process.h"
#include "temp_dir.h"

#include <kcache/client/client.h>
#include <kcache/client/pack_headers.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;
namespace fs = std::filesystem;

// scripts/test points KCACHE_WORKER_BINARY at a release worker; a sanitized
// one (the fallback) cannot run under an address-space limit.
std::vector<std::string> worker_args() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--worker-binary", release ? env : testing::built_binary("kcache-worker"),
          "--worker-memory", release ? "4GiB" : "0"};
}

TEST(PackHeadersIntegration, RefusedWithIncludeDirsCompilesOncePacked) {
  KcachedProcess kcached(worker_args());
  testing::TempDir host;
  fs::create_directories(host.path() / "ops");
  std::ofstream(host.path() / "ops" / "scale.h")
      << "#pragma once\n#include \"factor.h\"\n#include <cstddef>\n"
         "inline float scale(float x) { return x * kFactor; }\n";
  std::ofstream(host.path() / "ops" / "factor.h") << "constexpr float kFactor = 3.0f;\n";
  const json spec{{"backend", "cpp"},
                  {"source",
                   {{"name", "k.cpp"},
                    {"text", "#include <ops/scale.h>\n"
                             "extern \"C\" float kernel(float x) { return scale(x); }\n"}}},
                  {"name_expressions", {"kernel"}},
                  {"options", {"-O2", "-I", host.str()}},
                  {"target", "x86-64-v2"},
                  {"output", "shared"}};

  client::ClientOptions o;
  o.url = kcached.url();
  o.timeout = std::chrono::milliseconds(30000);
  auto c = Client::create(o);
  ASSERT_TRUE(c.has_value());
  auto& client = **c;

  auto refused = client.request(client::HttpMethod::kPost, "/v1/jobs", json{{"spec", spec}}.dump(),
                                "application/json");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("host path"), std::string::npos) << refused->body;

  auto packed = client::pack_headers(spec.dump());
  ASSERT_TRUE(packed.has_value()) << packed.error().message;
  const json packed_spec = json::parse(*packed);
  EXPECT_EQ(packed_spec["options"], json({"-O2"}));
  EXPECT_EQ(packed_spec["headers"].size(), 2U) << *packed;

  auto outcome = client.get_or_compile({.key = "pack-headers-it", .spec_json = *packed});
  ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
  ASSERT_EQ(outcome->kind, client::CompileOutcome::Kind::kCompiled)
      << (outcome->job ? outcome->job->json : "") << "\n"
      << kcached.log();
  ASSERT_TRUE(outcome->artifact.has_value());
  ASSERT_FALSE(outcome->artifact->files.empty());
  const std::string& elf = outcome->artifact->files.front().data;
  ASSERT_GT(elf.size(), 18U);
  EXPECT_EQ(elf.substr(0, 4), "\x7f"
                              "ELF");
  EXPECT_EQ(elf[16], 3) << "e_type ET_DYN: a shared object";
}

} // namespace
} // namespace kcache
