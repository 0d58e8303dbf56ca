#pragma once
// The guard expression language and its parser (private to cachekey).
//
// Python syntax as Dynamo and sympy print guards, plus the C spellings
// `&&`, `||` and `!` (read as `and`, `or`, `not`). Where a C spelling would
// mean something else in C it is refused: `!` before an unparenthesized
// comparison or arithmetic (`!a % 2` is `(!a) % 2` in C, `not (a % 2)` in
// Python), and decimal literals with a leading zero (`016` is octal in C). Precedence, lowest
// first:
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
  bool parenthesized = false; // written inside (...) (only the parser reads it)
  std::size_t depth = 1;      // height of the tree below and including this node

  // Filled in bottom-up by canonicalization (guards.cpp), once per node:
  std::string rendered; // canonical spelling of this subtree
  bool numeric = false; // provably a number, so `+` and `*` over it commute
  bool quiet = false;   // provably evaluates, and tests for truth, without raising
};

// Deep trees are refused rather than risking the stack of the recursive passes:
// the tree may be at most kMaxDepth nodes high, and the parser enters at most
// kMaxNesting levels of parentheses, brackets, calls, unary operators and `**`
// exponents (each costs several stack frames before any node exists).
inline constexpr std::size_t kMaxDepth = 1000;
inline constexpr std::size_t kMaxNesting = 250;
inline constexpr std::size_t kMaxGuardBytes = std::size_t{64} * 1024;
// Integer literals longer than this many digits are refused, as Python refuses
// them (its int_max_str_digits); converting them would cost quadratic time.
inline constexpr std::size_t kMaxIntegerDigits = 4300;

tl::expected<Expr, GuardError> parse(std::string_view guard);

// Integer literal text (decimal, 0x, 0o, 0b, with '_' separators) to its
// decimal value without leading zeros; exact up to kMaxIntegerDigits digits. A
// decimal literal with a leading zero (`016`, other than zeros alone) is
// refused: Python 3 rejects it and C reads it as octal.
tl::expected<std::string, GuardError> canonical_integer(std::string_view literal);
// Float literal text to an exact canonical decimal: the same value in any
// spelling ("0.050", "5e-2", ".05") gives one text; different values never do.
tl::expected<std::string, GuardError> canonical_float(std::string_view literal);

} // namespace kcache::cachekey::guard
