#pragma once
// Guard normalization. Guards are predicates over symbolic dims and tensor
// properties ("s0 % 16 == 0", "2 <= s0 <= 4096", "x.stride(1) == 1"). Two guard
// sets that say the same thing in different spelling must give one digest, and
// two that differ must never give one digest.
//
// A guard is parsed to a tree (grammar in cachekey/src/guard_parser.h) and
// rendered back in one canonical, precedence-correct spelling:
//   - whitespace and redundant parentheses go; `&&`, `||`, `!` read as `and`,
//     `or`, `not`;
//   - integers are written by value (`016` -> `16`, `0x10` -> `16`); floats are
//     canonicalised exactly as decimals (`0.050` == `5e-2`, `0.05` != `0.5`) and
//     stay distinct from integers (`2.0` != `2`);
//   - names are resolved through GuardNames (below); callee names (`Eq`, `Mod`)
//     and attribute names (`stride`) are never renamed;
//   - `a > b` becomes `b < a`, a chain written downwards (`4096 >= s0 >= 2`) is
//     turned upwards (`2 <= s0 <= 4096`); a single `==` / `!=` puts a literal on
//     the right and otherwise orders its two sides; the operands of `and` / `or`
//     are flattened and sorted; the two operands of `+` / `*` are sorted when
//     both are integers or symbols (never for tensors, strings or calls that may
//     return sequences, where `+` concatenates);
//   - normalize_guards splits top-level `and`s into separate guards (a guard
//     set is a conjunction), then sorts the set and drops duplicates.

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/sha256.h>

#include <tl/expected.hpp>

#include <map>
#include <span>
#include <string>
#include <vector>

namespace kcache::cachekey {

struct GuardError {
  std::string message;
};

// How names in guards are resolved:
//   - a graph symbol becomes its canonical name (`batch` -> `s0`);
//   - a graph input name becomes its position (`x` -> `in0`), matching the
//     graph digest, which ignores names but not input order;
//   - `True`, `False`, `None`, `oo`, `zoo`, `nan` are kept;
//   - any other name: refused when `closed` (a graph is known, so the name is
//     a typo or something the key cannot see); otherwise kept verbatim, unless
//     it spells a canonical name of another symbol or input (`s0` when `batch`
//     is renamed to `s0`), which would make two different guards collide.
// A name that is both a symbol and an input, or two inputs of one name, is
// refused as ambiguous.
struct GuardNames {
  SymbolMap symbols;
  std::map<std::string, std::string, std::less<>> tensors;
  bool closed = false;

  // The names of `graph` (its inputs) and its canonical symbol map; closed.
  static GuardNames for_graph(const Graph& graph, const SymbolMap& symbols);
};

tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const GuardNames& names);
tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const GuardNames& names);

// Symbols only, open (names not in the map are kept verbatim).
tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const SymbolMap& symbols = {});
tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const SymbolMap& symbols = {});

Digest guards_digest(std::span<const std::string> normalized_guards);

} // namespace kcache::cachekey
