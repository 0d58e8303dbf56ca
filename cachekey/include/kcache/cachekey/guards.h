#pragma once
// Guard normalization. Guards are predicates over symbolic dims and tensor
// properties ("s0 % 16 == 0", "2 <= s0 <= 4096", "x.stride(1) == 1"). Two guard
// sets that say the same thing in different spelling must give one digest, and
// two that differ must never give one digest.
//
// A guard is parsed to a tree (grammar in cachekey/src/guard_parser.h) and
// rendered back in one canonical, precedence-correct spelling:
//   - whitespace and redundant parentheses go; `&&`, `||`, `!` read as `and`,
//     `or`, `not` (`!` before unparenthesized comparison or arithmetic is
//     refused: C reads `!a % 2` as `(!a) % 2`);
//   - integers are written by value (`0x10` -> `16`; `016` is refused: octal in
//     C, an error in Python; more than 4300 digits are refused); floats are
//     canonicalised exactly as decimals (`0.050` == `5e-2`, `0.05` != `0.5`) and
//     stay distinct from integers (`2.0` != `2`);
//   - names are resolved through GuardNames (below); callee names (`Eq`, `Mod`)
//     and attribute names (`stride`) are never renamed;
//   - `a > b` becomes `b < a`, a chain written downwards (`4096 >= s0 >= 2`) is
//     turned upwards (`2 <= s0 <= 4096`) when nothing in it can raise (a
//     chain stops at its first false link, so reversing it changes which
//     operands run: see "quiet" below); a single `==` / `!=` puts a literal on
//     the right and otherwise orders its two sides;
//   - nested `and` / `or` of one kind are flattened. Their operands are sorted
//     only where the truth of the result alone is used (the whole guard, under
//     `not`, under such an `and` / `or`; never as a value: `-2 <= (a or 2)`,
//     `Max(a or b, 2)`), and only within runs of "quiet" operands, which
//     provably cannot raise (symbols, literals, `+ - *` and division by a
//     nonzero literal over them, comparisons of those, not/and/or of those),
//     so which operand short-circuits never changes whether something raises
//     (`3 or c % c` keeps its order);
//   - the two operands of `+` / `*` are sorted when both are provably numbers
//     (literals, symbols, sizes of graph inputs, numeric functions of numbers);
//     never for names the key cannot type (without a graph, any name may be a
//     tuple, a string or a tensor, where `+` concatenates or broadcasts);
//   - normalize_guards splits top-level `and`s into separate guards, then sorts
//     the set and drops duplicates. A set holds when every guard holds, and a
//     guard that raises does not hold; so {`a`, `b`} says what `a and b` says,
//     in any order. At most kMaxGuards guards per set.

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

inline constexpr std::size_t kMaxGuards = 10000;

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
