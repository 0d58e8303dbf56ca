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
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/job.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/tokens.h>
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

void auth_parsers(std::uint8_t selector, std::string_view input) {
  namespace sv = kcache::service;
  if (selector % 2 == 0) {
    // "header\nkey\npattern": the header's token, the key's namespace, the pattern.
    const std::size_t first = std::min(input.find('\n'), input.size());
    const std::size_t second = std::min(input.find('\n', first + 1), input.size());
    const std::string_view header = input.substr(0, first);
    const std::string_view key =
        input.substr(std::min(first + 1, input.size()), second - std::min(first + 1, second));
    const std::string_view pattern = input.substr(std::min(second + 1, input.size()));
    const std::vector<sv::Token> tokens = {
        sv::make_token("t", "0123456789abcdef0123456789abcdef", {{"*", sv::Role::kRead}})};
    if (auto token = sv::bearer_token(header)) {
      if (token->empty() || token->find(' ') != std::string_view::npos) {
        std::abort(); // a parsed token is one non-empty word
      }
      (void)sv::find_token(tokens, *token);
    }
    const sv::KeyScope scope = sv::key_scope(key);
    if (!sv::glob_match("*", scope.ns) || !sv::glob_match(pattern, pattern)) {
      std::abort(); // "*" matches anything; a pattern matches its own text
    }
    (void)sv::glob_match(pattern, scope.ns);
    const sv::Principal who{"fuzz", {{std::string(pattern), sv::Role::kWrite}}};
    (void)who.may(sv::Role::kWrite, scope.ns);
    return;
  }
  (void)sv::parse_token_file_text(input, "fuzz.toml", /*source_private=*/selector % 4 == 1);
  (void)sv::token_entropy_bits(input);
}

// 0xB0-0xBF: signed action records (issue 14): a record's signed fields and
// signature member, verified against one trusted key; or base64 and PEM.
void signature_parsers(std::uint8_t selector, std::string_view input) {
  namespace pr = kcache::protocol;
  if (selector % 2 == 0) {
    static const pr::TrustedKeys trusted = [] {
      pr::TrustedKeys keys;
      keys.add(*pr::SigningKey::generate());
      return keys;
    }();
    const nlohmann::json doc = pr::parse_json_or_discarded(input);
    const bool has_key = doc.is_object() && doc.contains("key") && doc["key"].is_string();
    const std::string key = has_key ? doc["key"].get<std::string>() : std::string();
    if (auto verified = pr::verify_record(key, doc, trusted)) {
      std::abort(); // nothing but the key's holder can sign, and the fuzzer has not got it
    }
    if (doc.is_object() && doc.contains("signature")) {
      if (auto sig = pr::record_signature_from_json(doc["signature"])) {
        const auto back = pr::record_signature_from_json(pr::to_json(*sig));
        if (!back || *back != *sig) {
          std::abort(); // a parsed signature round-trips
        }
      }
    }
    return;
  }
  if (auto bytes = pr::base64_decode(input)) {
    if (pr::base64_encode(*bytes) != input) {
      std::abort(); // strict decoding: one spelling per value
    }
  }
  pr::TrustedKeys keys;
  (void)keys.add_pem(input, "fuzz.pem");
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
  // 0xC0-0xCF: what authenticates a request (issue 14): an Authorization
  // header, then its token looked up and the key's namespace matched against
  // glob patterns; or a token file.
  if (data[0] >= 0xC0 && data[0] < 0xD0) {
    auth_parsers(data[0], input);
    return 0;
  }
  if (data[0] >= 0xB0 && data[0] < 0xC0) {
    signature_parsers(data[0], input);
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
