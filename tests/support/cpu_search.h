#pragma once
// A small CPU autotune search (a sum unrolled UNROLL times, each variant a
// cheap cpp compile) and its submission, shared by the cluster suites.

#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kcache::testing {

// A small CPU autotune search: `unrolls` variants of a sum and the reference
// (UNROLL 1), each a cheap cpp compile.
inline nlohmann::json sum_search(const std::vector<int>& unrolls) {
  using nlohmann::json;
  return json{{"backend", "cpp"},
              {"source", {{"name", "sum.cpp"}, {"text", R"(
extern "C" void sum(const float* x, float* out, int n) {
  float acc[UNROLL];
  for (int j = 0; j < UNROLL; ++j) acc[j] = 0.f;
  int i = 0;
  for (; i + UNROLL <= n; i += UNROLL)
    for (int j = 0; j < UNROLL; ++j) acc[j] += x[i + j];
  float r = 0.f;
  for (int j = 0; j < UNROLL; ++j) r += acc[j];
  for (; i < n; ++i) r += x[i];
  out[0] = r;
}
)"}}},
              {"name_expressions", {"sum"}},
              {"options", {"-O2"}},
              {"target", "x86-64-v2"},
              {"output", "shared"},
              {"autotune",
               {{"params", {{"UNROLL", unrolls}}},
                {"benchmark",
                 {{"shapes", {{"N", 1 << 16}}},
                  {"args",
                   {{{"buffer", "x"}, {"count", "N"}, {"seed", 3}},
                    {{"buffer", "out"}, {"count", "1"}, {"output", true}},
                    {{"scalar", "N"}, {"dtype", "i32"}}}},
                  {"reference", {{"UNROLL", 1}}},
                  {"tolerance", 1e-3},
                  {"repeats", 3}}}}}};
}

inline nlohmann::json submit_search(client::Client& c, const std::string& key,
                                    const nlohmann::json& search, const std::string& tuning_class) {
  const nlohmann::json body{{"key", key}, {"spec", search}, {"tuning_class", tuning_class}};
  auto res = c.request(client::HttpMethod::kPost, "/v1/jobs", body.dump(), "application/json");
  EXPECT_TRUE(res.has_value());
  return res ? nlohmann::json::parse(res->body, nullptr, false) : nlohmann::json();
}

} // namespace kcache::testing
