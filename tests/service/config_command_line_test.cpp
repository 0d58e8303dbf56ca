// Issue 17 part 3: kcached's file, flags and KCACHED_* variables refuse what
// they do not know, name it, and stack flag > variable > file > default.

#include "kcached_process.h"
#include "temp_config.h"

#include <kcache/protocol/build_info.h>
#include <kcache/service/config.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

namespace kcache::service {
namespace {

using testing::write_temp_config;

std::string file_error(const std::string& toml) {
  auto loaded = load_config_file(write_temp_config(toml));
  return loaded ? std::string("(loaded)") : loaded.error();
}

tl::expected<ServiceConfig, CommandLineExit> parse(std::vector<const char*> args,
                                                   const Environment& env = {}) {
  args.insert(args.begin(), "kcached");
  return parse_command_line(static_cast<int>(args.size()), args.data(), env);
}

std::string flag_error(std::vector<const char*> args, const Environment& env = {}) {
  auto c = parse(std::move(args), env);
  if (c) {
    return "(parsed)";
  }
  EXPECT_EQ(c.error().code, 2) << c.error().text;
  return c.error().text;
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(ConfigCommandLine, UnknownKeysAndSectionsInTheFileAreErrorsNamingThem) {
  const std::string typo = file_error("disk_capacty = \"1GiB\"\n");
  EXPECT_HAS(typo, "unknown key disk_capacty (did you mean disk_capacity?)");
  EXPECT_HAS(typo, ".toml: ");
  EXPECT_HAS(file_error("[limts]\nmax_body_bytes = 5\n"),
             "unknown section [limts] (did you mean [limits]?)");
  EXPECT_HAS(file_error("[limits]\nmax_conections = 5\n"),
             "unknown key limits.max_conections (did you mean limits.max_connections?)");
  EXPECT_HAS(file_error("[jobs]\nworkers = 1\n[jobs.extra]\nx = 1\n"), "unknown key jobs.extra");
  EXPECT_HAS(file_error("[[tokens]]\nnme = \"a\"\n"), "unknown key nme (did you mean name?)");
  EXPECT_HAS(file_error("frobnicate = 1\n"), "unknown key frobnicate");
  // A token_file's tables are checked as strictly, and it holds nothing else.
  const std::string tokens =
      write_temp_config("[[tokens]]\nname = \"a\"\nrle = \"read\"\n", "tokens");
  std::filesystem::permissions(tokens, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write);
  EXPECT_HAS(file_error("token_file = \"" + tokens + "\"\n"),
             "unknown key rle (did you mean role?)");
  std::ofstream(tokens) << "listen = \"0.0.0.0:1\"\n";
  EXPECT_HAS(file_error("token_file = \"" + tokens + "\"\n"),
             "unknown key listen: a token file holds [[tokens]] tables only");
}

TEST(ConfigCommandLine, WrongTypesInTheFileNameTheKeyAndTheType) {
  EXPECT_HAS(file_error("[jobs]\nworkers = \"two\"\n"),
             "jobs.workers must be a non-negative integer");
  EXPECT_HAS(file_error("threads = -1\n"), "threads must be a non-negative integer");
  EXPECT_HAS(file_error("[cluster]\nenabled = \"yes\"\n"),
             "cluster.enabled must be true or false, not a string");
  EXPECT_HAS(file_error("[jobs]\nworker_binary = 3\n"),
             "jobs.worker_binary must be a string, not an integer");
  EXPECT_HAS(file_error("memory_capacity = 1.5\n"), "memory_capacity must be a size");
  EXPECT_HAS(file_error("log_level = \"verbose\"\n"), "unknown log level 'verbose'");
  EXPECT_HAS(file_error("limits = 3\n"), "limits must be a table ([limits])");
}

TEST(ConfigCommandLine, FlagsTakeTheirValueAfterASpaceOrAnEqualsSign) {
  auto c = parse({"--workers=3", "--queue-capacity", "9", "--listen=127.0.0.1:5", "--unix-socket",
                  "", "--cluster-heartbeat-ms=7", "--store=memory://", "--store", "rocksdb:///d",
                  "--allow-plain-http", "--log-level=debug"});
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->jobs.workers, 3U);
  EXPECT_EQ(c->jobs.queue_capacity, 9U);
  EXPECT_EQ(c->listen, "127.0.0.1:5");
  EXPECT_EQ(c->unix_socket, "");
  EXPECT_EQ(c->cluster.heartbeat, std::chrono::milliseconds(7));
  EXPECT_EQ(c->stores, (std::vector<std::string>{"memory://", "rocksdb:///d"}));
  EXPECT_TRUE(c->allow_plain_http);
  EXPECT_EQ(c->log_level, "debug");
  // The settings only the file had before have flags too.
  c = parse({"--max-attempts", "5", "--compile-cpu-time-s=9", "--tls-min-version", "1.3"});
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->jobs.max_attempts, 5U);
  EXPECT_EQ(c->jobs.cpu_time, std::chrono::seconds(9));
  EXPECT_EQ(c->tls.min_version, "1.3");
}

TEST(ConfigCommandLine, UnknownFlagsBadNumbersAndBadLevelsExitWith2) {
  EXPECT_HAS(flag_error({"--listn", "127.0.0.1:1"}),
             "unknown option --listn (did you mean --listen?)");
  EXPECT_HAS(flag_error({"--workers=2", "--frobnicate=1"}), "unknown option --frobnicate");
  EXPECT_HAS(flag_error({"stray"}), "unexpected argument 'stray'");
  EXPECT_HAS(flag_error({"--workers", "abc"}), "--workers: 'abc' is not a non-negative integer");
  EXPECT_HAS(flag_error({"--workers", "-1"}), "--workers");
  EXPECT_HAS(flag_error({"--max-body-bytes", "lots"}), "--max-body-bytes");
  EXPECT_HAS(flag_error({"--log-level", "verbose"}), "unknown log level 'verbose'");
  EXPECT_HAS(flag_error({"--cluster=maybe"}), "--cluster: 'maybe' is not true or false");
  EXPECT_HAS(flag_error({"--workers"}), "--workers");
}

// Age eviction follows this node's reads and removes from every tier: with a
// Redis tier every node shares, it would delete what other nodes read.
TEST(ConfigCommandLine, AgeEvictionIsRefusedWithASharedRedisTier) {
  EXPECT_HAS(flag_error({"--evict-older-than", "7d", "--redis-url", "redis://127.0.0.1:1/0"}),
             "evict_older_than (--evict-older-than) removes what this node has not read");
  EXPECT_HAS(flag_error({"--evict-older-than", "7d", "--store", "memory://", "--store",
                         "redis://127.0.0.1:1/0"}),
             "(stores) is shared by every node");
  EXPECT_TRUE(parse({"--evict-older-than", "7d"}).has_value());
}

TEST(ConfigCommandLine, HelpAndVersionExitWith0) {
  auto help = parse({"--help"});
  ASSERT_FALSE(help.has_value());
  EXPECT_EQ(help.error().code, 0);
  EXPECT_HAS(help.error().text, "usage: kcached");
  EXPECT_HAS(help.error().text, "--max-connections-per-peer N");
  EXPECT_HAS(help.error().text, "KCACHED_MAX_CONNECTIONS_PER_PEER");
  EXPECT_HAS(help.error().text, "file limits.max_connections_per_peer");
  EXPECT_HAS(help.error().text, "token_file (file only)");
  EXPECT_EQ(help.error().text, usage());
  auto version = parse({"--workers", "1", "--version"});
  ASSERT_FALSE(version.has_value());
  EXPECT_EQ(version.error().code, 0);
  EXPECT_EQ(version.error().text, protocol::version_line("kcached"));
}

TEST(ConfigCommandLine, AFlagBeatsItsVariableWhichBeatsTheFile) {
  const std::string path =
      write_temp_config("listen = \"127.0.0.1:1\"\nthreads = 4\n[jobs]\nworkers = 1\n"
                        "[signing]\ntrusted_keys = [\"/file.pub\"]\n");
  const Environment env = {{"KCACHED_CONFIG", path},
                           {"KCACHED_LISTEN", "127.0.0.1:2"},
                           {"KCACHED_WORKERS", "2"},
                           {"KCACHED_TRUSTED_KEYS", "/a.pub,/b.pub"},
                           {"KCACHED_FORCE_WORKER_MEMORY", "1"},
                           {"KCACHED_SERVICE_HOST", "10.0.0.1"}}; // Kubernetes': ignored
  auto c = parse({"--workers", "3"}, env);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->threads, 4U);                // file
  EXPECT_EQ(c->listen, "127.0.0.1:2");      // variable over file
  EXPECT_EQ(c->jobs.workers, 3U);           // flag over variable
  EXPECT_TRUE(c->jobs.force_worker_memory); // variable
  EXPECT_EQ(c->signing.trusted_keys, (std::vector<std::string>{"/a.pub", "/b.pub"}));
  // --config names the file over KCACHED_CONFIG.
  const std::string other = write_temp_config("threads = 6\n");
  c = parse({"--config", other.c_str()}, env);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->threads, 6U);
  EXPECT_HAS(flag_error({}, {{"KCACHED_WORKERS", "many"}}), "KCACHED_WORKERS: 'many'");
  EXPECT_HAS(flag_error({}, {{"KCACHED_STORES", "memory://"}, {"KCACHED_REDIS_URL", "redis://r"}}),
             "KCACHED_STORES replaces KCACHED_REDIS_URL");
  // A lower source's tier options give way to a higher source's stores.
  c = parse({"--store", "memory://"}, {{"KCACHED_REDIS_URL", "redis://r"}});
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(store_urls(*c), (std::vector<std::string>{"memory://"}));
}

// The real binary: --help on stdout with 0, a typo on stderr with 2.
TEST(ConfigCommandLine, KcachedHelpAndATypoFromTheBinary) {
  std::string out;
  EXPECT_EQ(testing::run_command({testing::built_binary("kcached"), "--help"}, out), 0);
  EXPECT_HAS(out, "usage: kcached");
  out.clear();
  EXPECT_EQ(testing::run_command({testing::built_binary("kcached"), "--data-dri", "/tmp/x"}, out),
            2);
  EXPECT_EQ(out, ""); // the message went to stderr
}

} // namespace
} // namespace kcache::service
