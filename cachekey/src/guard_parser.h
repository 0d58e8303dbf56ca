#pragma once
// The guard expression language and its parser (private to cachekey).
//
// Python syntax as Dynamo and sympy print guards, plus the C spellings
// `&&`, `||` and `!` (read as `and`, `or`, `not`). Precedence, lowest first:
//   or | and | not | comparisons (chained: `2 <= s0 <= 4096`; also `in`,
//   `not in`, `is`, `is not`) | + - | * / // % | unary - + | ** (right
//   associative) | calls f(a, b), attributes x.size, subscripts x[0].
// Anything else (bitwise operators, slices, keyword arguments, tuples, ...) is
// refused, never skipped: a guard the parser cannot read fully cannot be keyed.

#include <kcache/cachekey/guards.h>

#include <tl/expected.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kcache::cachekey::guard {

enum class Kind {
  kNumber,    // text: canonical literal ("16", "0.05", "1.0e-30")
  kString,    // text: the literal as written, quotes included
  kName,      // text: the name
  kUnary,     // text: "-", "+" or "not"; children: operand
  kBinary,    // text: "+", "-", "*", "/", "//", "%" or "**"; children: lhs, rhs
  kBoolOp,    // text: "and" or "or"; children: two or more operands
  kCompare,   // ops: the comparison operators; children: ops.size() + 1 operands
  kCall,      // children: callee (a name or an attribute), then the arguments
  kAttribute, // text: the attribute name; children: the object
  kSubscript, // children: the object, the index
};

struct Expr {
  Kind kind = Kind::kName;
  std::string text;
  std::vector<std::string> ops;
  std::vector<Expr> children;
  bool is_float = false;      // kNumber: written with a point or an exponent
  bool parenthesized = false; // written inside (...) (only the parser reads it)
  std::size_t depth = 1;      // height of the tree below and including this node
};

// Deep trees are refused rather than risking the stack of the recursive passes.
inline constexpr std::size_t kMaxDepth = 1000;
inline constexpr std::size_t kMaxGuardBytes = std::size_t{64} * 1024;

tl::expected<Expr, GuardError> parse(std::string_view guard);

// Integer literal text (decimal, 0x, 0o, 0b, with '_' separators) to its
// decimal value without leading zeros; exact for any length.
tl::expected<std::string, GuardError> canonical_integer(std::string_view literal);
// Float literal text to an exact canonical decimal: the same value in any
// spelling ("0.050", "5e-2", ".05") gives one text; different values never do.
tl::expected<std::string, GuardError> canonical_float(std::string_view literal);

} // namespace kcache::cachekey::guard
