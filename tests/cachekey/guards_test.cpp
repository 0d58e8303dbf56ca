// Guard normalization through the parser: exact literals, precedence-correct
// canonical rendering, renaming with a graph's symbols and inputs, refusals.
// (guards_options_test.cpp holds the older spelling tests.)

#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/guards.h>

#include <gtest/gtest.h>

#include <random>

namespace kcache::cachekey {
namespace {

// Without a graph: s0..s3 are symbols (integers); any other name is unknown
// and kept verbatim.
GuardNames symbol_names() {
  return GuardNames{{{"s0", "s0"}, {"s1", "s1"}, {"s2", "s2"}, {"s3", "s3"}}, {}, false};
}

std::string norm(std::string_view g, const GuardNames& names = symbol_names()) {
  auto out = normalize_guard(g, names);
  EXPECT_TRUE(out.has_value()) << g << ": " << (out ? "" : out.error().message);
  return out.value_or("");
}

std::string error_of(std::string_view g, const GuardNames& names = symbol_names()) {
  auto out = normalize_guard(g, names);
  EXPECT_FALSE(out.has_value()) << g << " was accepted as " << out.value_or("");
  return out ? std::string() : out.error().message;
}

GuardNames block_names() {
  const Graph g = testing::make_block(); // inputs x [s0, 768], w [768, 768]
  return GuardNames::for_graph(g, digest_graph(g).symbols);
}

TEST(GuardLiterals, IntegersByValue) {
  EXPECT_EQ(norm("s0 % 0x10 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 % 0o20 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 % 0b10000 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 < 1_000"), "s0 < 1000");
  EXPECT_EQ(norm("s0 < 0"), "s0 < 0");
  EXPECT_EQ(norm("s0 < 000"), "s0 < 0");
  // Beyond any machine integer: still exact.
  EXPECT_EQ(norm("s0 < 0_0"), "s0 < 0");
  EXPECT_EQ(norm("s0 < 123456789012345678901234567890"), "s0 < 123456789012345678901234567890");
  EXPECT_EQ(norm("s0 < 0xFFFFFFFFFFFFFFFFFFFF"), "s0 < 1208925819614629174706175");
}

TEST(GuardLiterals, FloatsExact) {
  EXPECT_EQ(norm("s0 * 0.05 < 1"), "0.05 * s0 < 1");
  EXPECT_EQ(norm("s0 * 0.5 < 1"), "0.5 * s0 < 1");
  EXPECT_EQ(norm("s0 * 00.050 < 1"), "0.05 * s0 < 1");
  EXPECT_EQ(norm("s0 * 5e-2 < 1"), "0.05 * s0 < 1");
  EXPECT_EQ(norm("s0 * .05 < 1"), "0.05 * s0 < 1");
  EXPECT_EQ(norm("s0 < 1e3"), "s0 < 1000.0");
  EXPECT_EQ(norm("s0 < 1000."), "s0 < 1000.0");
  EXPECT_EQ(norm("s0 < 1.5E+2"), "s0 < 150.0");
  EXPECT_EQ(norm("s0 < 0.0"), "s0 < 0.0");
  EXPECT_EQ(norm("s0 < 0e10"), "s0 < 0.0");
  EXPECT_EQ(norm("s0 < 1.5e-10"), "s0 < 1.5e-10");
  EXPECT_EQ(norm("s0 < 1e30"), "s0 < 1.0e30");
  EXPECT_EQ(norm("s0 < 0.1000000000000000000001"), "s0 < 0.1000000000000000000001");
  // A float is never an integer, and -0.0 is not 0.0.
  EXPECT_NE(norm("s0 / 2.0 < 1"), norm("s0 / 2 < 1"));
  EXPECT_NE(norm("s0 * -0.0 < 1"), norm("s0 * 0.0 < 1"));
}

TEST(GuardLiterals, Malformed) {
  error_of("s0 < 0x");
  error_of("s0 < 0xZ1");
  error_of("s0 < 12abc");
  error_of("s0 < 1e");
  error_of("s0 < 1e999999999999999999999");
  error_of("s0 < 3j");
  error_of("s0 == 'open");
}

TEST(GuardRendering, PrecedenceKeptParenthesesDropped) {
  EXPECT_EQ(norm("((s0 * 2)) + (1) == 9"), "1 + 2 * s0 == 9");
  EXPECT_EQ(norm("s0 * (2 + 1) == 9"), "(1 + 2) * s0 == 9");
  EXPECT_EQ(norm("s0 - (1 - s1) < 0"), "s0 - (1 - s1) < 0");
  EXPECT_EQ(norm("(s0 - 1) - s1 < 0"), "s0 - 1 - s1 < 0");
  EXPECT_EQ(norm("2 ** 3 ** s0 < 9"), "2 ** 3 ** s0 < 9");
  EXPECT_EQ(norm("(2 ** 3) ** s0 < 9"), "(2 ** 3) ** s0 < 9");
  EXPECT_EQ(norm("-s0 ** 2 < 0"), "-s0 ** 2 < 0");
  EXPECT_EQ(norm("(-s0) ** 2 < 0"), "(-s0) ** 2 < 0");
  EXPECT_EQ(norm("2 ** -s0 < 1"), "2 ** -s0 < 1");
  EXPECT_EQ(norm("- - s0 < 1"), "--s0 < 1");
  EXPECT_EQ(norm("s0 // 2 * 2 == s0"), "2 * (s0 // 2) == s0");
  EXPECT_EQ(norm("s0 // (2 * 2) == 1"), "s0 // (2 * 2) == 1");
}

TEST(GuardRendering, BooleanOperators) {
  EXPECT_EQ(norm("s0 > 2 && s1"), "2 < s0 and s1");
  EXPECT_EQ(norm("2 && s1 < s0"), "2 and s1 < s0");
  EXPECT_EQ(norm("s1 || s0"), "s0 or s1");
  EXPECT_EQ(norm("a and (b and c)"), "a and b and c");
  EXPECT_EQ(norm("a or b and c"), "a or b and c");
  EXPECT_EQ(norm("(a or b) and c"), "(a or b) and c");
  EXPECT_EQ(norm("!(s0 == 3)"), "not s0 == 3");
  EXPECT_EQ(norm("!a"), "not a");
  EXPECT_EQ(norm("not not a"), "not not a");
  EXPECT_NE(norm("not a or b"), norm("not (a or b)"));
  // C reads "!a == b" as "(!a) == b", Python as "not (a == b)".
  EXPECT_NE(error_of("!s0 == 3").find("ambiguous"), std::string::npos);
  EXPECT_EQ(norm("(!s0) == 3"), "(not s0) == 3");
}

TEST(GuardRendering, Comparisons) {
  EXPECT_EQ(norm("s0 > 2"), "2 < s0");
  EXPECT_EQ(norm("s0 >= 2"), "2 <= s0");
  EXPECT_EQ(norm("4096 >= s0 >= 2"), "2 <= s0 <= 4096");
  EXPECT_EQ(norm("4096 > s0 >= 2"), "2 <= s0 < 4096");
  EXPECT_EQ(norm("2 <= s0 <= 4096"), "2 <= s0 <= 4096");
  EXPECT_EQ(norm("a < b > c"), "a < b > c"); // mixed directions stay
  EXPECT_EQ(norm("(2 <= s0) <= 4096"), "(2 <= s0) <= 4096");
  EXPECT_EQ(norm("0 == s0 % 16"), "s0 % 16 == 0");
  EXPECT_EQ(norm("-1 == s0"), "s0 == -1");
  EXPECT_EQ(norm("7 != s0"), "s0 != 7");
  EXPECT_EQ(norm("s1 == s0"), "s0 == s1");
  EXPECT_EQ(norm("a == b == c"), "a == b == c"); // chains keep their order
  EXPECT_EQ(norm("x is None"), "x is None");
  EXPECT_EQ(norm("x is not None"), "x is not None");
  EXPECT_EQ(norm("s0 not in y"), "s0 not in y");
}

TEST(GuardRendering, CommutativeOnlyWhereProvable) {
  EXPECT_EQ(norm("s1 + s0 < 9"), "s0 + s1 < 9");
  EXPECT_EQ(norm("16 * s0 < 9"), norm("s0 * 16 < 9"));
  EXPECT_EQ(norm("x.size(0) * 2 < 9", block_names()), norm("2 * x.size(0) < 9", block_names()));
  EXPECT_EQ(norm("Max(s1, 2) + s0 < 9"), norm("s0 + Max(s1, 2) < 9"));
  // Sizes are tuples: + concatenates, so the order stays.
  EXPECT_NE(norm("x.size() + y.size() == z"), norm("y.size() + x.size() == z"));
  EXPECT_NE(norm("'a' + 'b' == z"), norm("'b' + 'a' == z"));
  EXPECT_NE(norm("s0 - s1 < 9"), norm("s1 - s0 < 9"));
  EXPECT_NE(norm("s0 / s1 < 9"), norm("s1 / s0 < 9"));
  // Calls are generic: their arguments keep their order.
  EXPECT_NE(norm("Mod(s0, 16) == 0"), norm("Mod(16, s0) == 0"));
  EXPECT_EQ(norm("Eq(Mod(s0, 16), 0)"), "Eq(Mod(s0, 16), 0)");
}

TEST(GuardRendering, PostfixForms) {
  EXPECT_EQ(norm("x . stride( 1 ) == 1"), "x.stride(1) == 1");
  EXPECT_EQ(norm("x.size()[0] == 4"), "x.size()[0] == 4");
  EXPECT_EQ(norm("L['x'].size()[0] == 4"), "L['x'].size()[0] == 4");
  EXPECT_EQ(norm("(s0 + 1).bit_length() < 9"), "(1 + s0).bit_length() < 9");
  EXPECT_EQ(norm("f() == 1"), "f() == 1");
}

TEST(GuardNamesTest, GraphInputsAndSymbols) {
  const GuardNames names = block_names();
  EXPECT_EQ(norm("x.stride(1) == 1", names), "in0.stride(1) == 1");
  EXPECT_EQ(norm("w.size(0) == s0", names), "in1.size(0) == s0");
  EXPECT_EQ(norm("Max(s0, 2) < 9", names), "Max(s0, 2) < 9");
  EXPECT_EQ(norm("s0 > 2 and True", names), "2 < s0 and True");
  // Callee and attribute names are never renamed, even when they spell an input.
  EXPECT_EQ(norm("x(1) == 2", names), "x(1) == 2");
  EXPECT_EQ(norm("w.x == 2", names), "in1.x == 2");
}

TEST(GuardNamesTest, SymbolsRenamedWithTheGraph) {
  Graph g;
  g.add_input("inp", testing::tensor("f32", {Dim::symbol("batch"), Dim::symbol("seq")}));
  const GuardNames names = GuardNames::for_graph(g, digest_graph(g).symbols);
  EXPECT_EQ(norm("seq % 8 == 0 && batch > 1", names), "1 < s0 and s1 % 8 == 0");
  EXPECT_EQ(norm("inp.size(1) == seq", names), "in0.size(1) == s1");
}

TEST(GuardNamesTest, UnknownNamesRefusedWithAGraph) {
  const GuardNames names = block_names();
  EXPECT_NE(error_of("batch % 16 == 0", names).find("unknown name 'batch'"), std::string::npos);
  error_of("mm.stride(0) == 1", names); // an intermediate node, not an input
  error_of("s1 > 2", names);            // the block has one symbol
  error_of("in0.stride(1) == 1", names);
}

TEST(GuardNamesTest, AmbiguousNamesRefused) {
  Graph dup;
  dup.add_input("x", testing::tensor("f32", {Dim::fixed(4)}));
  dup.add_input("x", testing::tensor("f32", {Dim::fixed(4)}));
  EXPECT_NE(error_of("x.stride(0) == 1", GuardNames::for_graph(dup, {})).find("several inputs"),
            std::string::npos);

  Graph both;
  both.add_input("n", testing::tensor("f32", {Dim::symbol("n")}));
  error_of("n > 2", GuardNames::for_graph(both, digest_graph(both).symbols));

  // Open names: one that spells another symbol's canonical name would collide.
  const SymbolMap symbols{{"batch", "s0"}};
  EXPECT_NE(error_of("s0 > 2", GuardNames{symbols, {}, false}).find("canonical"),
            std::string::npos);
  EXPECT_EQ(norm("u0 > 2", GuardNames{symbols, {}, false}), "2 < u0");
}

TEST(GuardNamesTest, WithoutAGraphNamesAreVerbatim) {
  EXPECT_EQ(norm("x.stride(1) == 1"), "x.stride(1) == 1");
  EXPECT_NE(norm("u0 > 2"), norm("u1 > 2"));
}

TEST(GuardSets, ConjunctionsSplitSortedDeduplicated) {
  const std::vector<std::string> a = {"s0 % 16 == 0 and 2 <= s0", "s0 <= 4096", "2 <= s0"};
  const std::vector<std::string> b = {"s0 <= 4096 && 16 * 1 != 0 && s0 >= 2", "0 == s0 % 16"};
  auto na = normalize_guards(a);
  auto nb = normalize_guards(b);
  ASSERT_TRUE(na && nb);
  EXPECT_EQ(*na, (std::vector<std::string>{"2 <= s0", "s0 % 16 == 0", "s0 <= 4096"}));
  EXPECT_EQ(nb->size(), 4U); // "16 * 1 != 0" is not evaluated
  // An "or" is one guard.
  auto nc = normalize_guards(std::vector<std::string>{"a or b"});
  ASSERT_TRUE(nc);
  EXPECT_EQ(*nc, (std::vector<std::string>{"a or b"}));
}

TEST(GuardErrors, RefusedNeverSkipped) {
  for (const char* bad : {"",
                          "   ",
                          "s0 & 1",
                          "s0 | 1",
                          "s0 ^ 1",
                          "~s0",
                          "x[1:2] == 1",
                          "f(a=1) == 1",
                          "s0 ==",
                          "== s0",
                          "s0 == 2 3",
                          "(s0 == 2",
                          "s0 == 2)",
                          "1 if s0 else 2",
                          "lambda: 1",
                          "x in (1, 2)",
                          "f(1,) == 1",
                          "3(1) == 1",
                          "x.1 == 2",
                          "s0 $ 2",
                          "not",
                          "s0 <> 2"}) {
    error_of(bad);
  }
}

TEST(GuardErrors, DeepInputIsRefusedNotACrash) {
  error_of(std::string(5000, '(') + "s0" + std::string(5000, ')') + " == 1");
  error_of(std::string(5000, '-') + "s0 == 1");
  error_of(std::string(5000, '!') + "s0");
  std::string long_sum = "s0";
  for (int i = 0; i < 3000; ++i) {
    long_sum += " + s0";
  }
  error_of(long_sum + " == 1");
  error_of(std::string(std::size_t{70} * 1024, ' ') + "s0 == 1");
  // A wide but shallow guard is fine.
  std::string wide = "s0 == 0";
  for (int i = 1; i < 2000; ++i) {
    wide += " or s0 == " + std::to_string(i);
  }
  EXPECT_TRUE(normalize_guard(wide).has_value());
}

TEST(GuardSets, DigestOfEquivalentSetsIsEqual) {
  const GuardNames names = block_names();
  auto a = normalize_guards(std::vector<std::string>{"x.stride(1) == 1", "4096 >= s0 >= 2"}, names);
  auto b = normalize_guards(std::vector<std::string>{"2<=s0<=4096 and 1==x.stride(1)"}, names);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(guards_digest(*a), guards_digest(*b));
}

// --- Review findings: each case below collided (one key for two meanings) or
// ran unbounded before the fix. ---

constexpr std::size_t kMaxNestingForTest = 250; // guard_parser.h's kMaxNesting

GuardNames abc_names() { // a, b, c are the graph's symbols (integers)
  return GuardNames{{{"a", "s0"}, {"b", "s1"}, {"c", "s2"}}, {}, true};
}

TEST(GuardReview, AndOrOperandsKeepTheirOrderWhereTheValueIsUsed) {
  const GuardNames n = abc_names();
  // `a or b` returns an operand: its value differs with the order.
  EXPECT_NE(norm("-2 <= (a or 2)", n), norm("-2 <= (2 or a)", n));
  EXPECT_NE(norm("(a or b) == 3", n), norm("(b or a) == 3", n));
  EXPECT_NE(norm("(a and b) == 3", n), norm("(b and a) == 3", n));
  EXPECT_NE(norm("Max(a or b, 2) == 3", n), norm("Max(b or a, 2) == 3", n));
  EXPECT_NE(norm("(a or b) + 1 < 3", n), norm("(b or a) + 1 < 3", n));
  EXPECT_NE(norm("x[a or b] == 1"), norm("x[b or a] == 1"));
  // Where only the truth is used, quiet operands still sort.
  EXPECT_EQ(norm("b or a", n), norm("a or b", n));
  EXPECT_EQ(norm("not (b or a)", n), norm("not (a or b)", n));
  EXPECT_EQ(norm("c == 1 or (b < 2 and a < 2)", n), norm("(a < 2 and b < 2) or c == 1", n));
  EXPECT_EQ(norm("a % 2 == 0 or b // 4 < 1", n), norm("b // 4 < 1 or a % 2 == 0", n));
  // ... also inside a value, under not/and/or in boolean position.
  EXPECT_EQ(norm("Max(not (b or a), 2) == 2", n), norm("Max(not (a or b), 2) == 2", n));
}

TEST(GuardReview, AndOrOperandsThatMayRaiseKeepTheirPlace) {
  const GuardNames n = abc_names();
  // `3 or c % c` is true; `c % c or 3` raises ZeroDivisionError when c == 0.
  EXPECT_NE(norm("3 or c % c", n), norm("c % c or 3", n));
  EXPECT_NE(norm("c == 0 or 1 // c == 0", n), norm("1 // c == 0 or c == 0", n));
  EXPECT_NE(norm("a == 0 or 1 / a < 2", n), norm("1 / a < 2 or a == 0", n));
  EXPECT_NE(norm("not (c != 0 and 4 % c == 0)", n), norm("not (4 % c == 0 and c != 0)", n));
  // Calls, attributes, subscripts, `**`, tensors and unknown names may raise.
  EXPECT_NE(norm("a < 2 or Max(a, b) < 2", n), norm("Max(a, b) < 2 or a < 2", n));
  EXPECT_NE(norm("a ** -1 < 2 or a == 0", n), norm("a == 0 or a ** -1 < 2", n));
  EXPECT_NE(norm("x.size(0) == 2 or x.size(1) == 2", block_names()),
            norm("x.size(1) == 2 or x.size(0) == 2", block_names()));
  EXPECT_NE(norm("p or q"), norm("q or p")); // unknown: perhaps tensors, bool() raises
  EXPECT_NE(norm("'a' < 1 or a < 1", n), norm("a < 1 or 'a' < 1", n)); // TypeError
  // Quiet runs around one that may raise sort among themselves only.
  EXPECT_EQ(norm("b < 1 or a < 1 or c % b == 0 or c < 1", n),
            "s0 < 1 or s1 < 1 or s2 % s1 == 0 or s2 < 1");
  EXPECT_EQ(norm("a < 1 or b < 1 or c % b == 0 or c < 1", n),
            norm("b < 1 or a < 1 or c % b == 0 or c < 1", n));
  // A chain stops at its first false link: turned around, other links run.
  EXPECT_NE(norm("0 >= 2 >= 1 // c", n), norm("1 // c <= 2 <= 0", n));
  EXPECT_EQ(norm("4096 >= a >= 2", n), norm("2 <= a <= 4096", n));
  EXPECT_EQ(norm("a > 1 // c", n), "1 // s2 < s0"); // two operands always both run
}

TEST(GuardReview, NotBeforeArithmeticIsRefused) {
  // C reads `!a % 2` as `(!a) % 2`, Python's `not` takes `a % 2`.
  for (const char* g : {"!s0 % 2", "!s0 + 1", "!s0 - 1 == 0", "!s0 * 2", "!s0 // 2", "!s0 / 2",
                        "!s0 ** 2", "!!s0 % 2", "!(s0) % 2", "!-s0 + 1"}) {
    EXPECT_NE(error_of(g).find("ambiguous"), std::string::npos) << g;
  }
  EXPECT_EQ(norm("!(s0 % 2)"), norm("not (s0 % 2)"));
  EXPECT_EQ(norm("(!s0) % 2 == 1"), "(not s0) % 2 == 1");
  EXPECT_EQ(norm("!s0.x"), "not s0.x");
  EXPECT_EQ(norm("!f(s0) && s1"), "not f(s0) and s1");
  EXPECT_EQ(norm("!-s0"), "not -s0");
}

TEST(GuardReview, DecimalLeadingZeroIsRefused) {
  // C reads 016 as octal 14; Python 3 refuses it.
  for (const char* g : {"s0 == 016", "s0 == 00016", "s0 == 0_16", "s0 % 01 == 0"}) {
    EXPECT_NE(error_of(g).find("leading zero"), std::string::npos) << g;
  }
  EXPECT_EQ(norm("s0 == 00"), "s0 == 0");
  EXPECT_EQ(norm("s0 == 0o16"), "s0 == 14");
  EXPECT_EQ(norm("s0 == 016.5"), "s0 == 16.5"); // a float: decimal in both languages
  // Separators as Python allows them: single, between digits.
  for (const char* g :
       {"s0 == 1__0", "s0 == 1_", "s0 == 0x10_", "s0 < 1_.5", "s0 < 1._5", "s0 < 1e_1"}) {
    error_of(g);
  }
  EXPECT_EQ(norm("s0 == 0x_1_0"), "s0 == 16");
}

TEST(GuardReview, OpenModeNamesAreNotNumbers) {
  // Without a graph `p` and `q` may be tuples: `p + q` concatenates.
  EXPECT_NE(norm("(p + q)[0] == 1"), norm("(q + p)[0] == 1"));
  EXPECT_NE(norm("p * q == r"), norm("q * p == r"));
  EXPECT_NE(norm("p * 2 == r"), norm("2 * p == r")); // a list times 2 repeats it
  EXPECT_NE(norm("x.size(0) + y.size(0) == z"), norm("y.size(0) + x.size(0) == z"));
  // Symbols are integers, with or without a graph.
  EXPECT_EQ(norm("s1 + s0 < 9"), norm("s0 + s1 < 9"));
  EXPECT_EQ(norm("b * a == 4", abc_names()), norm("a * b == 4", abc_names()));
}

TEST(GuardReview, HugeLiteralsAndSetsAreRefused) {
  const std::string digits(4301, '7');
  EXPECT_NE(error_of("s0 == " + digits).find("at most 4300"), std::string::npos);
  EXPECT_NE(error_of("s0 == 0x" + std::string(4301, 'f')).find("at most 4300"), std::string::npos);
  EXPECT_NE(error_of("s0 == " + std::string(std::size_t{60} * 1024, '7')).find("at most 4300"),
            std::string::npos);
  EXPECT_EQ(norm("s0 == " + std::string(4300, '7')), "s0 == " + std::string(4300, '7'));
  // A float literal is read in linear time: no cap beyond the guard's size.
  const std::string long_float = "s0 < 1." + std::string(5000, '0') + "1";
  EXPECT_EQ(norm(long_float), long_float);

  std::vector<std::string> many(kMaxGuards, "s0 > 1");
  EXPECT_TRUE(normalize_guards(many).has_value());
  many.emplace_back("s0 > 1");
  auto refused = normalize_guards(many);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("at most 10000"), std::string::npos);
}

TEST(GuardReview, DepthLimitsSayWhatTheyCount) {
  // Each parenthesis, bracket, call, unary operator or `**` nests one level.
  EXPECT_TRUE(normalize_guard(std::string(kMaxNestingForTest, '(') + "s0" +
                              std::string(kMaxNestingForTest, ')') + " == 1")
                  .has_value());
  const std::string too_many = error_of(std::string(kMaxNestingForTest + 1, '(') + "s0" +
                                        std::string(kMaxNestingForTest + 1, ')') + " == 1");
  EXPECT_NE(too_many.find("more than 250 parentheses"), std::string::npos) << too_many;
  EXPECT_NE(error_of(std::string(251, '-') + "s0 == 1").find("more than 250"), std::string::npos);
  std::string power = "s0";
  for (int i = 0; i < 251; ++i) {
    power += " ** s0";
  }
  EXPECT_NE(error_of(power + " == 1").find("more than 250"), std::string::npos);
  // The tree itself may be 1000 levels high (a left-nested sum nests nothing).
  std::string sum = "s0";
  for (int i = 0; i < 990; ++i) {
    sum += " + s1";
  }
  EXPECT_TRUE(normalize_guard(sum + " == 1").has_value());
  EXPECT_NE(error_of(sum + " + s1 + s1 + s1 + s1 + s1 + s1 + s1 + s1 + s1 + s1 == 1")
                .find("more than 1000 levels deep"),
            std::string::npos);
}

TEST(GuardReview, DeepChainsAreRenderedOnce) {
  // Each node is rendered once from its children's spellings; deep and wide
  // input still reads back as itself.
  std::string one = "s0";
  for (int i = 0; i < 900; ++i) {
    one += " + s" + std::to_string(i % 4);
  }
  std::string wide = "(" + one + " < 1)";
  for (int i = 0; i < 12; ++i) {
    wide += " or (" + one + " < 1)";
  }
  const std::string once = norm(wide);
  EXPECT_EQ(norm(once), once);
  EXPECT_EQ(norm("(s1 + s0) * (s3 + s2) < 9"), "(s0 + s1) * (s2 + s3) < 9");
}

// A random expression over the whole grammar, parenthesized everywhere so the
// parser, not the generator, decides the tree.
std::string random_expr(std::mt19937& rng, int depth) {
  auto pick = [&](std::initializer_list<const char*> items) {
    return std::string(items.begin()[rng() % items.size()]);
  };
  if (depth == 0 || rng() % 4 == 0) {
    return pick({"s0", "s1", "x", "7", "0.5", "2e3", "True", "'a'", "x.size(0)", "x.size()[1]"});
  }
  const auto sub = [&] { return random_expr(rng, depth - 1); };
  switch (rng() % 6) {
  case 0:
    return pick({"-", "+", "not ", "!"}) + "(" + sub() + ")";
  case 1:
    return sub() + pick({" + ", " - ", " * ", " / ", " // ", " % ", " ** "}) + sub();
  case 2:
    return sub() + pick({" < ", " > ", " <= ", " >= ", " == ", " != "}) + sub();
  case 3:
    return sub() + pick({" and ", " or ", " && ", " || "}) + sub();
  case 4:
    return pick({"Max", "Mod", "f"}) + "(" + sub() + ", " + sub() + ")";
  default:
    return "(" + sub() + ")";
  }
}

TEST(GuardRendering, CanonicalFormIsAFixedPoint) {
  // Rendering must read back as the same tree: normalizing twice changes nothing.
  std::mt19937 rng(12345);
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string g = random_expr(rng, 5);
    auto once = normalize_guard(g);
    if (!once) {
      continue; // e.g. "!" before a bare comparison
    }
    ++checked;
    auto twice = normalize_guard(*once);
    ASSERT_TRUE(twice.has_value()) << g << " -> " << *once << ": " << twice.error().message;
    EXPECT_EQ(*once, *twice) << g;
  }
  EXPECT_GT(checked, 2000);
}

} // namespace
} // namespace kcache::cachekey
