#pragma once
// A value-parameterized GoogleTest suite over RedisKind (redis_backend.h):
// INSTANTIATE it with RedisKinds() and each test runs on a standalone
// redis-server and on the 3-master Redis Cluster, named .../Standalone and
// .../RedisCluster. The suite's tests share one backend of each kind per
// process, started on first use (a process that runs only Standalone tests
// starts no cluster) and stopped after the suite; each test keys under its
// own namespace (ns()), and whatever a test broke is healed after it.

#include "redis_backend.h"

#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <memory>
#include <string>

namespace kcache::testing {

inline auto RedisKinds() {
  return ::testing::Values(RedisKind::kStandalone, RedisKind::kCluster);
}

inline std::string RedisKindName(const ::testing::TestParamInfo<RedisKind>& info) {
  return kind_name(info.param);
}

class RedisSuite : public ::testing::TestWithParam<RedisKind> {
protected:
  static void TearDownTestSuite() {
    for (auto& backend : backends_) {
      backend.reset();
    }
  }
  void TearDown() override {
    if (auto& backend = backends_[slot()]; backend) {
      backend->heal();
    }
  }

  RedisBackend& redis() {
    auto& backend = backends_[slot()];
    if (!backend) {
      backend = std::make_unique<RedisBackend>(GetParam());
    }
    return *backend;
  }
  bool on_cluster() const { return GetParam() == RedisKind::kCluster; }
  // This test's namespace: its name, so tests sharing a backend share no key.
  static std::string ns() {
    std::string out;
    for (const char c :
         std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {
      out += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '-';
    }
    return out;
  }

private:
  std::size_t slot() const { return GetParam() == RedisKind::kStandalone ? 0 : 1; }
  static inline std::array<std::unique_ptr<RedisBackend>, 2> backends_;
};

} // namespace kcache::testing
