#pragma once
// `kcache-worker --bench`: benchmarks compiled autotune variants against a
// reference, in a worker process (a variant that crashes takes down that
// process only). The request is a parts body:
//   "request"     JSON: {"search": <autotune JSON>, "device": "cpu"|"cuda",
//                        "entry": "symbol", "reference": "<id>", "check": true,
//                        "variants": [{"id": "BM=32", "params": {"BM": 32}}, ...]}
//   "<id>"        one part per variant (and the reference): its binary
// The worker answers with one JSON line per variant as each finishes, so a
// crash loses only the variant that was running (WorkerRunner::bench reruns
// the rest).

#include <kcache/compiler/autotune_spec.h>

#include <tl/expected.hpp>

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
tl::expected<BenchRequest, std::string> decode_bench_request(std::string_view body);
std::string encode_bench_result(const BenchResult& result); // one line, no newline
tl::expected<BenchResult, std::string> decode_bench_result(std::string_view line);

} // namespace kcache::compiler
