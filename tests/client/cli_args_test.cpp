// kcache's command line (issue 17 part 3): a bad command line is a usage
// error (exit 2) that names what is wrong, never silently ignored;
// --flag=value works; --help goes to stdout; --version names the build. A
// Unix socket path too long for sockaddr_un is an error value from the C++
// client, the C ABI and the CLI, never an abort.

#include "kcached_process.h"

#include <kcache/client/client.h>
#include <kcache/kcache.h>
#include <kcache/protocol/build_info.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kcache {
namespace {

using nlohmann::json;

// Runs kcache with `args`; `out` gets stdout, `err` stdout and stderr.
int kcache_cli(const std::vector<std::string>& args, std::string& out, std::string* err = nullptr,
               const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {testing::built_binary("kcache")};
  argv.insert(argv.end(), args.begin(), args.end());
  const int rc = testing::run_command(argv, out, env);
  if (err != nullptr) {
    std::string line = "'" + argv[0] + "'";
    for (const std::string& a : args) {
      line += " '" + a + "'"; // the tests' arguments hold no quote
    }
    testing::run_command({"/bin/sh", "-c", line + " 2>&1"}, *err, env);
  }
  return rc;
}

TEST(CliArgs, UnknownFlagsCommandsAndTyposAreUsageErrors) {
  std::string out, err;
  EXPECT_EQ(kcache_cli({"verify", "--repiar"}, out, &err), 2);
  EXPECT_NE(err.find("did you mean '--repair'"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"ls", "--jsn"}, out, &err), 2);
  EXPECT_NE(err.find("did you mean '--json'"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"--bogus", "stats"}, out, &err), 2);
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"lss"}, out, &err), 2);
  EXPECT_NE(err.find("unknown command 'lss'; did you mean 'ls'"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"show", "k1", "k2"}, out), 2);
  EXPECT_EQ(kcache_cli({}, out), 2);
}

TEST(CliArgs, BadNumbersAndSizesNameTheFlag) {
  std::string out, err;
  EXPECT_EQ(kcache_cli({"--timeout-ms", "abc", "stats"}, out, &err), 2);
  EXPECT_NE(err.find("--timeout-ms"), std::string::npos) << err;
  EXPECT_NE(err.find("abc"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"ls", "--limit=-1"}, out, &err), 2);
  EXPECT_NE(err.find("--limit"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"gc", "--max-size", "lots"}, out, &err), 2);
  EXPECT_NE(err.find("--max-size"), std::string::npos) << err;
  EXPECT_EQ(kcache_cli({"ls", "--sort", "colour"}, out, &err), 2);
  EXPECT_NE(err.find("--sort"), std::string::npos) << err;
}

TEST(CliArgs, HelpGoesToStdoutAndVersionNamesTheBuild) {
  std::string out;
  EXPECT_EQ(kcache_cli({"--help"}, out), 0);
  EXPECT_NE(out.find("verify"), std::string::npos) << out;
  EXPECT_NE(out.find("exit codes"), std::string::npos) << out;
  EXPECT_EQ(kcache_cli({"verify", "--help"}, out), 0);
  EXPECT_NE(out.find("--repair"), std::string::npos) << out;
  EXPECT_EQ(kcache_cli({"jobs", "watch", "--help"}, out), 0);
  EXPECT_NE(out.find("--interval-ms"), std::string::npos) << out;
  EXPECT_EQ(kcache_cli({"--version"}, out), 0);
  // The git revision is left out: any reconfigure (of any helper's tree) moves it.
  const protocol::BuildInfo info = protocol::build_info();
  EXPECT_TRUE(out.starts_with("kcache " + std::string(info.version) + " (git ")) << out;
  EXPECT_TRUE(out.ends_with(", key schema " + std::to_string(info.key_schema) + ", C ABI " +
                            std::to_string(info.c_abi) + ")\n"))
      << out;
}

TEST(CliArgs, AUnixSocketPathTooLongIsAnErrorNotAnAbort) {
  const std::string url = "unix:///tmp/" + std::string(200, 's') + ".sock";
  client::ClientOptions options;
  options.url = url;
  auto created = client::Client::create(options);
  ASSERT_FALSE(created.has_value());
  EXPECT_EQ(created.error().code, client::ErrorCode::kInvalid);
  EXPECT_NE(created.error().message.find("107"), std::string::npos) << created.error().message;

  kcache_options c_options{url.c_str(), nullptr, 500, 0};
  kcache_client* handle = nullptr;
  EXPECT_EQ(kcache_client_open(&c_options, &handle), KCACHE_ERR_INVALID);
  EXPECT_EQ(handle, nullptr);

  std::string out, err;
  EXPECT_EQ(kcache_cli({"--url", url, "stats"}, out, &err), 2);
  EXPECT_NE(err.find("Unix socket path"), std::string::npos) << err;
}

class CliArgsWithDaemon : public ::testing::Test {
protected:
  void SetUp() override {
    client::ClientOptions options;
    options.url = kcached_.url();
    auto c = client::Client::create(options);
    ASSERT_TRUE(c.has_value());
    for (const char* key : {"cli-args-1", "cli-args-2"}) {
      ASSERT_TRUE((*c)->put(key, {{"kernel.bin", std::string(3000, 'k')}}).has_value());
    }
  }
  testing::KcachedProcess kcached_;
};

TEST_F(CliArgsWithDaemon, FlagEqualsValueIsHonoured) {
  std::string out;
  // --url=... wins over $KCACHE_URL (which points nowhere).
  ASSERT_EQ(kcache_cli({"--url=" + kcached_.url(), "ls", "--limit=1", "--json"}, out, nullptr,
                       {"KCACHE_URL=http://127.0.0.1:1"}),
            0)
      << out;
  const json listed = json::parse(out);
  EXPECT_EQ(listed["entries"].size(), 1U) << out;
  EXPECT_EQ(listed["total"], 2) << out;
  // And $KCACHE_URL alone is read.
  EXPECT_EQ(kcache_cli({"ls", "--json"}, out, nullptr, {"KCACHE_URL=" + kcached_.url()}), 0);
  EXPECT_EQ(json::parse(out)["entries"].size(), 2U) << out;
  EXPECT_EQ(kcache_cli({"--url", kcached_.url(), "verify", "--repair", "--json"}, out), 0) << out;
  EXPECT_EQ(json::parse(out)["problems"].size(), 0U) << out;
}

} // namespace
} // namespace kcache
