#pragma once
// A config file for one test: written under the temp directory, named by the
// test's suite, name and gtest's seed (so no two tests share one), and by
// `name` when a test writes several.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kcache::testing {

inline std::string write_temp_config(const std::string& text, const std::string& name = "kcached") {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path =
      std::filesystem::temp_directory_path() /
      ("kcache-config-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
       test->test_suite_name() + "." + test->name() + "-" + name + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

} // namespace kcache::testing
