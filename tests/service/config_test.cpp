#include "temp_config.h"

#include <kcache/service/config.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace kcache::service {
namespace {

using testing::write_temp_config;

// The example ships no working secret: it loads once its placeholders are
// replaced with `kcache token new`'s sha256 lines, and not before.
TEST(Config, TheShippedExampleLoadsOnceItsTokensAreReplaced) {
  const std::string example = KCACHE_SOURCE_DIR "/deploy/kcached.toml";
  auto refused = load_config_file(example);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("sha256 is still the example's placeholder"), std::string::npos)
      << refused.error();
  EXPECT_NE(refused.error().find("kcache token new"), std::string::npos) << refused.error();
  std::ifstream in(example);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int n = 0;
  for (std::size_t at = 0; (at = text.find("<replace: kcache token new>")) != std::string::npos;) {
    text.replace(at, 27, std::string(63, 'a') + std::to_string(n++));
  }
  auto c = load_config_file(write_temp_config(text));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->listen, "127.0.0.1:7070");
  EXPECT_EQ(c->disk_capacity, 200ULL << 30);
  EXPECT_EQ(c->limits.max_body_bytes, 2ULL << 30);
  EXPECT_EQ(c->limits.idle_timeout, std::chrono::seconds(120));
  ASSERT_EQ(c->tokens.size(), 4U);
  EXPECT_EQ(c->tokens[1].name, "ci");
  ASSERT_EQ(c->tokens[1].roles.size(), 1U);
  EXPECT_EQ(c->tokens[1].roles[0].role, Role::kSubmit);
  ASSERT_EQ(c->tokens[2].roles.size(), 2U); // roles per namespace pattern
  EXPECT_EQ(c->tokens[3].roles[0].role, Role::kAdmin);
  EXPECT_EQ(c->jobs.workers, 8U);
  EXPECT_EQ(c->jobs.queue_capacity, 4096U);
  EXPECT_EQ(c->jobs.negative_ttl, std::chrono::seconds(300));
  EXPECT_EQ(c->jobs.memory_bytes, 8ULL << 30);
  EXPECT_EQ(c->jobs.wall_clock, std::chrono::seconds(600));
  EXPECT_EQ(c->jobs.max_spec_bytes, 16ULL << 20);
  EXPECT_EQ(c->jobs.max_jobs_per_submitter, 512U);
  EXPECT_EQ(c->jobs.retry_backoff, std::chrono::milliseconds(1000));
  // 8 workers x 8 GiB starts on a node of 64 GiB or more.
  EXPECT_TRUE(check_worker_memory(c->jobs, 64ULL << 30).has_value());
  EXPECT_FALSE(check_worker_memory(c->jobs, 63ULL << 30).has_value());
}

// Issue 13: workers x worker memory above the host's memory is refused at
// start-up, naming both numbers and the flag that forces it.
TEST(Config, WorkerMemoryOverTheHostIsRefusedUnlessForced) {
  JobsConfig jobs;
  jobs.workers = 8;
  jobs.memory_bytes = 16ULL << 30;
  auto refused = check_worker_memory(jobs, 64ULL << 30);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("128.0 GiB"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("64.0 GiB"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("--force-worker-memory"), std::string::npos) << refused.error();
  EXPECT_TRUE(check_worker_memory(jobs, 128ULL << 30).has_value()) << "equal fits";
  jobs.force_worker_memory = true;
  EXPECT_TRUE(check_worker_memory(jobs, 64ULL << 30).has_value());
  jobs.force_worker_memory = false;
  jobs.workers = 0;
  EXPECT_TRUE(check_worker_memory(jobs, 64ULL << 30).has_value()) << "compiles nothing";
  jobs.workers = 8;
  jobs.memory_bytes = 0; // unlimited (sanitizer builds): no sum to compare
  EXPECT_TRUE(check_worker_memory(jobs, 64ULL << 30).has_value());
  EXPECT_GT(host_memory_bytes(), 0U);

  // The default yields to a small host; a configured limit is judged.
  JobsConfig by_default;
  by_default.workers = 2;
  fit_default_worker_memory(by_default, 15ULL << 30); // a "16 GB" runner
  EXPECT_EQ(by_default.memory_bytes, 15ULL << 29);
  EXPECT_TRUE(check_worker_memory(by_default, 15ULL << 30).has_value());
  JobsConfig configured = by_default;
  configured.memory_bytes = 8ULL << 30;
  configured.memory_configured = true;
  fit_default_worker_memory(configured, 15ULL << 30);
  EXPECT_EQ(configured.memory_bytes, 8ULL << 30);
  EXPECT_FALSE(check_worker_memory(configured, 15ULL << 30).has_value());
  const char* defaults[] = {"kcached", "--workers", "1000"};
  auto d = parse_command_line(3, defaults);
  ASSERT_TRUE(d.has_value()) << d.error().text;
  EXPECT_LE(d->jobs.memory_bytes * 1000, host_memory_bytes());

  const char* too_much[] = {"kcached", "--workers", "1000", "--worker-memory", "1TiB"};
  auto c = parse_command_line(5, too_much);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().text.find("exceeds this host's memory"), std::string::npos) << c.error().text;
  const char* forced[] = {"kcached",         "--workers", "1000",
                          "--worker-memory", "1TiB",      "--force-worker-memory"};
  c = parse_command_line(6, forced);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_TRUE(c->jobs.force_worker_memory);
}

TEST(Config, SubmissionBounds) {
  const std::string path = write_temp_config("[jobs]\nmax_spec_bytes = \"2MiB\"\n"
                                             "max_jobs_per_submitter = 7\nretry_backoff_ms = 50\n"
                                             "force_worker_memory = true\n");
  auto file = load_config_file(path);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->jobs.max_spec_bytes, 2ULL << 20);
  EXPECT_EQ(file->jobs.max_jobs_per_submitter, 7U);
  EXPECT_EQ(file->jobs.retry_backoff, std::chrono::milliseconds(50));
  EXPECT_TRUE(file->jobs.force_worker_memory);
  const char* argv[] = {"kcached", "--max-spec-bytes", "1MiB", "--max-jobs-per-submitter", "3"};
  auto c = parse_command_line(5, argv);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->jobs.max_spec_bytes, 1ULL << 20);
  EXPECT_EQ(c->jobs.max_jobs_per_submitter, 3U);
}

TEST(Config, JobFlags) {
  const char* argv[] = {"kcached", "--workers",        "3",    "--queue-capacity",
                        "9",       "--negative-ttl-s", "5",    "--compile-timeout-s",
                        "7",       "--worker-memory",  "2GiB", "--worker-binary",
                        "/w"};
  auto c = parse_command_line(13, argv);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->jobs.workers, 3U);
  EXPECT_EQ(c->jobs.queue_capacity, 9U);
  EXPECT_EQ(c->jobs.negative_ttl, std::chrono::seconds(5));
  EXPECT_EQ(c->jobs.wall_clock, std::chrono::seconds(7));
  EXPECT_EQ(c->jobs.memory_bytes, 2ULL << 30);
  EXPECT_EQ(c->jobs.worker_binary, "/w");
}

TEST(Config, FlagsOverrideTheFile) {
  const std::string path = write_temp_config("listen = \"127.0.0.1:1\"\nmemory_capacity = 1024\n");
  const char* argv[] = {"kcached",         "--config", path.c_str(), "--listen", "127.0.0.1:2",
                        "--disk-capacity", "3GiB",     "--threads",  "7"};
  auto c = parse_command_line(9, argv);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->listen, "127.0.0.1:2");
  EXPECT_EQ(c->memory_capacity, 1024U);
  EXPECT_EQ(c->disk_capacity, 3ULL << 30);
  EXPECT_EQ(c->threads, 7U);
}

// [signing] (issue 14): the key file, the trusted keys; flags replace the
// file's list; --print-public-key takes no value.
TEST(Config, SigningKeysFromTheFileAndFlags) {
  const std::string path =
      write_temp_config("[signing]\nkey_file = \"/etc/kcache/signing.pem\"\n"
                        "trusted_keys = [\"/etc/kcache/a.pub\", \"/etc/kcache/trusted\"]\n");
  auto file = load_config_file(path);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->signing.key_file, "/etc/kcache/signing.pem");
  EXPECT_EQ(file->signing.trusted_keys,
            (std::vector<std::string>{"/etc/kcache/a.pub", "/etc/kcache/trusted"}));
  const char* argv[] = {"kcached",       "--config",           path.c_str(),     "--trusted-keys",
                        "/k/b.pub",      "--print-public-key", "--trusted-keys", "/k/c.pub",
                        "--signing-key", "/k/node.pem"};
  auto flags = parse_command_line(static_cast<int>(std::size(argv)), argv);
  ASSERT_TRUE(flags.has_value()) << flags.error().text;
  EXPECT_EQ(flags->signing.trusted_keys, (std::vector<std::string>{"/k/b.pub", "/k/c.pub"}));
  EXPECT_EQ(flags->signing.key_file, "/k/node.pem");
  EXPECT_TRUE(flags->signing.print_public_key);
  EXPECT_FALSE(ServiceConfig{}.signing.print_public_key);
  EXPECT_TRUE(ServiceConfig{}.signing.key_file.empty()); // data_dir/signing.pem
  EXPECT_NE(load_config_file(write_temp_config("[signing]\ntrusted_keys = \"/k\"\n"))
                .error()
                .find("signing.trusted_keys must be an array of strings"),
            std::string::npos);
  EXPECT_NE(
      load_config_file(write_temp_config("[signing]\nkey_file = 3\n")).error().find("key_file"),
      std::string::npos);
  EXPECT_NE(load_config_file(write_temp_config("signing = 1\n")).error().find("[signing]"),
            std::string::npos);
  EXPECT_TRUE(load_config_file(write_temp_config("[signing]\ntrusted_keys = []\n")).has_value());
}

TEST(Config, ClearErrors) {
  EXPECT_NE(load_config_file("/nonexistent/kcached.toml").error().find("/nonexistent"),
            std::string::npos);
  EXPECT_NE(
      load_config_file(write_temp_config("listen = 5\n")).error().find("listen must be a string"),
      std::string::npos);
  EXPECT_NE(load_config_file(write_temp_config("disk_capacity = \"lots\"\n"))
                .error()
                .find("disk_capacity"),
            std::string::npos);
  EXPECT_NE(load_config_file(write_temp_config("[[tokens]]\nrole = \"root\"\nsha256 = \"" +
                                               std::string(64, 'a') + "\"\n"))
                .error()
                .find("unknown role"),
            std::string::npos);
  EXPECT_NE(load_config_file(write_temp_config("listen = \n")).error().find(".toml"),
            std::string::npos);
  const char* bad_flag[] = {"kcached", "--frobnicate", "1"};
  EXPECT_NE(parse_command_line(3, bad_flag).error().text.find("unknown option --frobnicate"),
            std::string::npos);
  const char* missing_value[] = {"kcached", "--listen"};
  const auto missing = parse_command_line(2, missing_value);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, 2);
  EXPECT_NE(missing.error().text.find("--listen"), std::string::npos) << missing.error().text;
}

// deploy/systemd's unit and the Kubernetes DaemonSet share the socket with a group.
TEST(Config, TheUnixSocketModeIsOctalAndTheGroupANameInTomlAndFlags) {
  auto file = load_config_file(
      write_temp_config("unix_socket_mode = \"0660\"\nunix_socket_group = \"kcache\"\n"));
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(file->unix_socket_mode, 0660U);
  EXPECT_EQ(file->unix_socket_group, "kcache");
  EXPECT_EQ(load_config_file(write_temp_config("listen = \"127.0.0.1:1\"\n"))->unix_socket_mode,
            0U);
  for (const char* bad : {"unix_socket_mode = \"0968\"\n", "unix_socket_mode = \"01777\"\n",
                          "unix_socket_mode = 432\n"}) {
    auto refused = load_config_file(write_temp_config(bad));
    ASSERT_FALSE(refused.has_value()) << bad;
    EXPECT_NE(refused.error().find("unix_socket_mode must be an octal string"), std::string::npos);
  }
  const char* flags[] = {"kcached", "--unix-socket-mode", "0600", "--unix-socket-group", "ops"};
  auto c = parse_command_line(5, flags);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(c->unix_socket_mode, 0600U);
  EXPECT_EQ(c->unix_socket_group, "ops");
  const char* bad_flag[] = {"kcached", "--unix-socket-mode", "rw-rw----"};
  EXPECT_NE(parse_command_line(3, bad_flag).error().text.find("--unix-socket-mode must be octal"),
            std::string::npos);
}

TEST(Config, TheTierOptionsMapOntoStoreUrls) {
  const char* argv[] = {
      "kcached",         "--data-dir", "/var/kc",     "--memory-capacity",         "1MiB",
      "--disk-capacity", "2GiB",       "--redis-url", "redis://r:6379?namespace=x"};
  auto c = parse_command_line(9, argv);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(store_urls(*c), (std::vector<std::string>{"memory://?capacity=1048576",
                                                      "rocksdb:///var/kc?capacity=2147483648",
                                                      "redis://r:6379?namespace=x"}));
  ServiceConfig defaults;
  EXPECT_EQ(store_urls(defaults).size(), 2U); // no Redis unless configured
}

TEST(Config, StoreUrlsReplaceTheTierOptions) {
  const char* argv[] = {"kcached", "--store", "memory://?capacity=1MiB", "--store",
                        "redis://r:6379"};
  auto c = parse_command_line(5, argv);
  ASSERT_TRUE(c.has_value()) << c.error().text;
  EXPECT_EQ(store_urls(*c),
            (std::vector<std::string>{"memory://?capacity=1MiB", "redis://r:6379"}));

  const std::string path = write_temp_config("stores = [\"memory://\", \"rocksdb:///d\"]\n");
  auto file = load_config_file(path);
  ASSERT_TRUE(file.has_value()) << file.error();
  EXPECT_EQ(store_urls(*file), (std::vector<std::string>{"memory://", "rocksdb:///d"}));
  // The command line's list replaces the file's.
  const char* over[] = {"kcached", "--config", path.c_str(), "--store", "memory://"};
  EXPECT_EQ(store_urls(*parse_command_line(5, over)), (std::vector<std::string>{"memory://"}));
}

TEST(Config, StoreUrlsAndTierOptionsTogetherAreRefused) {
  const char* argv[] = {"kcached", "--store", "memory://", "--redis-url", "redis://r"};
  auto c = parse_command_line(5, argv);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().text.find("--store replaces --redis-url"), std::string::npos)
      << c.error().text;
  auto file =
      load_config_file(write_temp_config("stores = [\"memory://\"]\nmemory_capacity = 5\n"));
  ASSERT_FALSE(file.has_value());
  EXPECT_NE(file.error().find("stores replaces memory_capacity"), std::string::npos);
  EXPECT_NE(load_config_file(write_temp_config("stores = \"memory://\"\n")).error().find("array"),
            std::string::npos);
}

} // namespace
} // namespace kcache::service
