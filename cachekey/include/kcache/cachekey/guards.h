#pragma once
// Guard normalization. Guards are predicates over symbolic dims and tensor
// properties ("s0 % 16 == 0", "2 <= s0 <= 4096", "x.stride(1) == 1"). Two guard
// sets that say the same thing in different spelling must give one digest:
//   - whitespace and number spelling are canonicalised ("016" -> "16");
//   - symbols are renamed through the graph's SymbolMap;
//   - a single comparison "a > b" becomes "b < a" and "a >= b" becomes "b <= a";
//     in a single "==" or "!=" a literal goes on the right, otherwise the two
//     sides are put in lexicographic order;
//   - the set is sorted and duplicates are dropped.

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/sha256.h>

#include <tl/expected.hpp>

#include <span>
#include <string>
#include <vector>

namespace kcache::cachekey {

struct GuardError {
  std::string message;
};

tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const SymbolMap& symbols = {});

tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const SymbolMap& symbols = {});

Digest guards_digest(std::span<const std::string> normalized_guards);

} // namespace kcache::cachekey
