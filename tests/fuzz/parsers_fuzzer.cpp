// libFuzzer target for every other parser of untrusted bytes: the first byte
// picks the parser, the rest is its input. Each must return a value or an
// error, never crash, hang or read out of bounds.

#include <kcache/cachekey/compiler_flags.h>
#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/graph_json.h>
#include <kcache/cachekey/guards.h>
#include <kcache/cachekey/hash_details.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/expression.h>
#include <kcache/compiler/spec_check.h>
#include <kcache/compiler/worker_protocol.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/job.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/value_frame.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

// Hash details as kcached hands them to `kcache explain`: lines of A, an
// empty line, lines of B.
void explain_hash_details(std::string_view input) {
  std::vector<std::string> sides[2];
  int side = 0;
  std::size_t start = 0;
  while (start <= input.size()) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    const std::string_view line = input.substr(start, end - start);
    if (line.empty() && side == 0) {
      side = 1;
    } else {
      sides[side].emplace_back(line);
    }
    start = end + 1;
  }
  namespace ck = kcache::cachekey;
  (void)ck::to_text(ck::explain_hash_details("a", ck::parse_hash_details(sides[0]), "b",
                                             ck::parse_hash_details(sides[1])));
}

// Compiler flags as NUL-separated arguments, in each family: parsing never
// fails in the generic one, and rendering is a fixed point (the worker parses
// what kcached rendered).
void parse_flags(std::string_view input) {
  namespace ck = kcache::cachekey;
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start <= input.size()) {
    const std::size_t end = std::min(input.find('\0', start), input.size());
    args.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  for (ck::FlagFamily family :
       {ck::FlagFamily::kGeneric, ck::FlagFamily::kNvrtc, ck::FlagFamily::kClang}) {
    auto parsed = ck::parse_flags(family, args);
    if (!parsed) {
      if (family == ck::FlagFamily::kGeneric) {
        std::abort();
      }
      continue;
    }
    const auto rendered = ck::render_flags(*parsed, /*for_key=*/false);
    auto again = ck::parse_flags(family, rendered);
    if (!again || ck::render_flags(*again, false) != rendered) {
      std::abort();
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  // First bytes from 0xF0 pick the job-side parsers, 0xE0-0xEF Inductor's
  // hash details, 0xD0-0xDF compile specs and flags (older seeds keep theirs).
  if (data[0] >= 0xE0 && data[0] < 0xF0) {
    explain_hash_details(input);
    return 0;
  }
  // 0xD0-0xDF: compile specs through the hermetic check, and flag lists.
  if (data[0] >= 0xD0 && data[0] < 0xE0) {
    if (data[0] % 2 == 0) {
      if (auto spec = kcache::compiler::spec_from_json(input)) {
        (void)kcache::compiler::prepare_spec(*spec);
      }
    } else {
      parse_flags(input);
    }
    return 0;
  }
  if (data[0] >= 0xF0) {
    switch (data[0] % 5) {
    case 0:
      (void)kcache::compiler::spec_from_json(input);
      break;
    case 1:
      (void)kcache::service::job_from_json(input);
      break;
    case 2:
      (void)kcache::compiler::decode_worker_outcome(input);
      break;
    case 3:
      (void)kcache::compiler::decode_toolchains(input);
      break;
    default:
      if (auto e = kcache::compiler::Expression::parse(input)) {
        (void)e->evaluate({{"BM", 64}, {"BN", -3}, {"M", 9223372036854775807LL}});
      }
      break;
    }
    return 0;
  }
  switch (data[0] % 6) {
  case 0:
    (void)kcache::protocol::wire::decode_parts(input);
    break;
  case 1:
    if (auto g = kcache::cachekey::parse_graph_json(input)) {
      (void)kcache::cachekey::digest_graph(*g);
    }
    break;
  case 2:
    (void)kcache::cachekey::manifest_from_json(input);
    break;
  case 3:
    (void)kcache::storage::record_from_json(input);
    break;
  case 4:
    (void)kcache::storage::decode_frame(input);
    break;
  default:
    (void)kcache::cachekey::normalize_guard(input);
    break;
  }
  return 0;
}
