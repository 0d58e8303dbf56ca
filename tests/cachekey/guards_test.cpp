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

std::string norm(std::string_view g, const GuardNames& names = {}) {
  auto out = normalize_guard(g, names);
  EXPECT_TRUE(out.has_value()) << g << ": " << (out ? "" : out.error().message);
  return out.value_or("");
}

std::string error_of(std::string_view g, const GuardNames& names = {}) {
  auto out = normalize_guard(g, names);
  EXPECT_FALSE(out.has_value()) << g << " was accepted as " << out.value_or("");
  return out ? std::string() : out.error().message;
}

GuardNames block_names() {
  const Graph g = testing::make_block(); // inputs x [s0, 768], w [768, 768]
  return GuardNames::for_graph(g, digest_graph(g).symbols);
}

TEST(GuardLiterals, IntegersByValue) {
  EXPECT_EQ(norm("s0 % 016 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 % 0x10 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 % 0o20 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 % 0b10000 == 0"), "s0 % 16 == 0");
  EXPECT_EQ(norm("s0 < 1_000"), "s0 < 1000");
  EXPECT_EQ(norm("s0 < 0"), "s0 < 0");
  EXPECT_EQ(norm("s0 < 000"), "s0 < 0");
  // Beyond any machine integer: still exact.
  EXPECT_EQ(norm("s0 < 000123456789012345678901234567890"), "s0 < 123456789012345678901234567890");
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
  EXPECT_EQ(norm("x.size(0) * 2 < 9"), norm("2 * x.size(0) < 9"));
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
  error_of(std::string(70 * 1024, ' ') + "s0 == 1");
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
