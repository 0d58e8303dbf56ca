#pragma once
// Issue 13's job attacks, shared by the reliability suite and the soak: the
// specs they submit (an autotune search of a x b variants, a spec of any
// size) and the kcache-worker processes a kill aims at.

#include "kcached_process.h"

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kcache::testing {

// kcached's worker flags: a release worker where scripts/test names one (a
// sanitized one cannot run under an address-space limit).
inline std::vector<std::string> worker_args() {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--worker-binary", release ? env : built_binary("kcache-worker"), "--worker-memory",
          release ? "4GiB" : "0"};
}

inline nlohmann::json cpp_spec(const std::string& source,
                               std::vector<std::string> options = {"-O2"}) {
  return nlohmann::json{{"backend", "cpp"},
                        {"source", {{"name", "kernel.cpp"}, {"text", source}}},
                        {"options", std::move(options)},
                        {"target", "x86-64-v2"},
                        {"output", "object"}};
}

// An autotune search over A = 1..a and B = 1..b (a parameter takes at most
// 4096 values).
inline nlohmann::json autotune_search(int a, int b) {
  nlohmann::json spec = cpp_spec("extern \"C\" void sum(const float* x, float* out, int n) { "
                                 "out[0] = A * B * x[0] + n; }");
  spec["output"] = "shared";
  spec["name_expressions"] = {"sum"};
  nlohmann::json as = nlohmann::json::array();
  nlohmann::json bs = nlohmann::json::array();
  for (int i = 1; i <= a; ++i) {
    as.push_back(i);
  }
  for (int i = 1; i <= b; ++i) {
    bs.push_back(i);
  }
  spec["autotune"] = {{"params", {{"A", as}, {"B", bs}}},
                      {"budget", {{"max_variants", a * b}}},
                      {"benchmark",
                       {{"shapes", {{"N", 64}}},
                        {"args",
                         {{{"buffer", "x"}, {"count", "N"}, {"seed", 3}},
                          {{"buffer", "out"}, {"count", "1"}, {"output", true}},
                          {{"scalar", "N"}, {"dtype", "i32"}}}},
                        {"reference", {{"A", 1}, {"B", 1}}}}}};
  return spec;
}

// A submission whose source is `size` bytes of 'x' (written directly: a
// sanitized nlohmann::json takes seconds over 100 MB).
inline std::string spec_body(std::size_t size) {
  return R"({"spec":{"backend":"cpp","source":{"name":"kernel.cpp","text":")" +
         std::string(size, 'x') +
         R"("},"options":["-O2"],"target":"x86-64-v2","output":"object"}})";
}

// The kcache-worker processes `parent` runs now.
inline std::vector<pid_t> workers_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    // pid (comm) state ppid ...
    const auto close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(kcache-worker)") == std::string::npos) {
      continue;
    }
    char state = 0;
    pid_t ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

} // namespace kcache::testing
