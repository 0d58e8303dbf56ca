#pragma once
// Inputs several suites share (kernels in tests/data/kernels), read at run
// time from the source tree (KCACHE_TEST_DATA_DIR, set in tests/CMakeLists.txt).

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kcache::testing {

inline std::string test_data(const std::string& relative_path) {
  const std::string path = std::string(KCACHE_TEST_DATA_DIR) + "/" + relative_path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read test data " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace kcache::testing
