#include <kcache/service/config.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kcache::service {
namespace {

std::string write_temp(const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() /
      ("kcache-config-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(Config, TheShippedExampleLoads) {
  auto c = load_config_file(KCACHE_SOURCE_DIR "/deploy/kcached.toml");
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->listen, "0.0.0.0:7070");
  EXPECT_EQ(c->disk_capacity, 200ULL << 30);
  EXPECT_EQ(c->limits.max_body_bytes, 2ULL << 30);
  EXPECT_EQ(c->limits.idle_timeout, std::chrono::seconds(120));
  ASSERT_EQ(c->tokens.size(), 4U);
  EXPECT_EQ(c->tokens[1].role, Role::kSubmit);
  EXPECT_EQ(c->tokens[3].role, Role::kAdmin);
  EXPECT_EQ(c->jobs.workers, 8U);
  EXPECT_EQ(c->jobs.queue_capacity, 4096U);
  EXPECT_EQ(c->jobs.negative_ttl, std::chrono::seconds(300));
  EXPECT_EQ(c->jobs.memory_bytes, 16ULL << 30);
  EXPECT_EQ(c->jobs.wall_clock, std::chrono::seconds(600));
}

TEST(Config, JobFlags) {
  const char* argv[] = {"kcached", "--workers",        "3",    "--queue-capacity",
                        "9",       "--negative-ttl-s", "5",    "--compile-timeout-s",
                        "7",       "--worker-memory",  "2GiB", "--worker-binary",
                        "/w"};
  auto c = parse_command_line(13, argv);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->jobs.workers, 3U);
  EXPECT_EQ(c->jobs.queue_capacity, 9U);
  EXPECT_EQ(c->jobs.negative_ttl, std::chrono::seconds(5));
  EXPECT_EQ(c->jobs.wall_clock, std::chrono::seconds(7));
  EXPECT_EQ(c->jobs.memory_bytes, 2ULL << 30);
  EXPECT_EQ(c->jobs.worker_binary, "/w");
}

TEST(Config, FlagsOverrideTheFile) {
  const std::string path = write_temp("listen = \"127.0.0.1:1\"\nmemory_capacity = 1024\n");
  const char* argv[] = {"kcached",         "--config", path.c_str(), "--listen", "127.0.0.1:2",
                        "--disk-capacity", "3GiB",     "--threads",  "7"};
  auto c = parse_command_line(9, argv);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->listen, "127.0.0.1:2");
  EXPECT_EQ(c->memory_capacity, 1024U);
  EXPECT_EQ(c->disk_capacity, 3ULL << 30);
  EXPECT_EQ(c->threads, 7U);
}

TEST(Config, ClearErrors) {
  EXPECT_NE(load_config_file("/nonexistent/kcached.toml").error().find("/nonexistent"),
            std::string::npos);
  EXPECT_NE(load_config_file(write_temp("listen = 5\n")).error().find("listen must be a string"),
            std::string::npos);
  EXPECT_NE(
      load_config_file(write_temp("disk_capacity = \"lots\"\n")).error().find("disk_capacity"),
      std::string::npos);
  EXPECT_NE(load_config_file(write_temp("[[tokens]]\nrole = \"root\"\ntoken = \"t\"\n"))
                .error()
                .find("unknown role"),
            std::string::npos);
  EXPECT_NE(load_config_file(write_temp("listen = \n")).error().find(".toml"), std::string::npos);
  const char* bad_flag[] = {"kcached", "--frobnicate", "1"};
  EXPECT_NE(parse_command_line(3, bad_flag).error().find("unknown option"), std::string::npos);
  const char* missing_value[] = {"kcached", "--listen"};
  EXPECT_NE(parse_command_line(2, missing_value).error().find("needs a value"), std::string::npos);
}

TEST(Config, TheTierOptionsMapOntoStoreUrls) {
  const char* argv[] = {
      "kcached",         "--data-dir", "/var/kc",     "--memory-capacity",         "1MiB",
      "--disk-capacity", "2GiB",       "--redis-url", "redis://r:6379?namespace=x"};
  auto c = parse_command_line(9, argv);
  ASSERT_TRUE(c.has_value()) << c.error();
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
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(store_urls(*c),
            (std::vector<std::string>{"memory://?capacity=1MiB", "redis://r:6379"}));

  const std::string path = write_temp("stores = [\"memory://\", \"rocksdb:///d\"]\n");
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
  EXPECT_NE(c.error().find("--store replaces --redis-url"), std::string::npos) << c.error();
  auto file = load_config_file(write_temp("stores = [\"memory://\"]\nmemory_capacity = 5\n"));
  ASSERT_FALSE(file.has_value());
  EXPECT_NE(file.error().find("stores replaces memory_capacity"), std::string::npos);
  EXPECT_NE(load_config_file(write_temp("stores = \"memory://\"\n")).error().find("array"),
            std::string::npos);
}

} // namespace
} // namespace kcache::service
