#pragma once
// `kcache-worker --bench`: benchmarks compiled autotune variants against a
// reference, in a worker process (a variant that crashes takes down that
// process only). The request is a parts body:
//   "request"     JSON: {"search": <autotune JSON>, "device": "cpu"|"cuda",
//                        "entry": "symbol", "reference": "<id>", "check": true,
//                        "variants": [{"id": "BM=32", "params": {"BM": 32}}, ...]}
//   "<id>"        one part per variant (and the reference): its binary
// The worker answers with one JSON line per variant as each finishes, so a
// crash loses only the variant that was running (the runner reruns the rest).
//
// One worker serves a whole search: requests follow one another on its stdin,
// each framed as its length in decimal, a newline and the body, and the worker
// exits at EOF. A GPU worker keeps its CUDA context, the loaded modules, the
// arguments on the device and the reference's outputs between rounds.

#include <kcache/compiler/autotune_spec.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace kcache::compiler {

struct BenchVariant {
  std::string id;
  Bindings params;
  std::string binary; // shared object (cpu) or CUBIN (cuda)
};

struct BenchRequest {
  std::string search_json;
  std::string device = "cpu";
  std::string entry;
  BenchVariant reference;
  std::vector<BenchVariant> variants;
  // Compare outputs with the reference. Later rounds of successive halving
  // time variants that were checked already, and skip the reference.
  bool check = true;
};

struct BenchResult {
  std::string id;
  std::string status; // ok | wrong (output differs) | error (cannot load/launch/crashed)
  double median_us = 0, min_us = 0;
  double max_error = 0;
  std::string error;
  friend bool operator==(const BenchResult&, const BenchResult&) = default;
};

std::string encode_bench_request(const BenchRequest& request);
// The request as the worker reads it from a stream of them.
std::string frame_bench_request(const BenchRequest& request);
// The longest frame a worker accepts.
inline constexpr std::uint64_t kMaxBenchFrame = std::uint64_t{4} << 30;

// How a GPU bench worker exits after a variant failed to load or launch: a
// CUDA fault is sticky (the context is unusable), so it stops after that
// variant's result and the runner goes on with the rest in a fresh worker,
// blaming none of them.
inline constexpr int kBenchRestartExit = 3;
tl::expected<BenchRequest, std::string> decode_bench_request(std::string_view body);
std::string encode_bench_result(const BenchResult& result); // one line, no newline
// A worker's answer for one variant: its line, flushed at once.
void write_bench_result(std::FILE* out, const BenchResult& result);
tl::expected<BenchResult, std::string> decode_bench_result(std::string_view line);

} // namespace kcache::compiler
