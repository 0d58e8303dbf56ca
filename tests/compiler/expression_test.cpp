// Autotune expressions: precedence, functions, checked arithmetic, clear errors.

#include <kcache/compiler/expression.h>

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

std::int64_t eval(const std::string& text, const Bindings& values = {}) {
  auto e = Expression::parse(text);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error());
  auto v = e->evaluate(values);
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error());
  return v.value_or(-999);
}

std::string error_of(const std::string& text, const Bindings& values = {}) {
  auto e = Expression::parse(text);
  if (!e) {
    return e.error();
  }
  auto v = e->evaluate(values);
  return v ? "" : v.error();
}

TEST(Expression, PrecedenceAndAssociativity) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("10 - 4 - 3"), 3);
  EXPECT_EQ(eval("100 / 10 / 5"), 2);
  EXPECT_EQ(eval("-3 * -2"), 6);
  EXPECT_EQ(eval("7 % 4 + 1"), 4);
  EXPECT_EQ(eval("1 < 2 == 1"), 1);
  EXPECT_EQ(eval("!0 && !(3 != 3)"), 1);
  EXPECT_EQ(eval("0 || 2 > 1 && 3 <= 3"), 1);
  EXPECT_EQ(eval("1 ? 2 : 3 ? 4 : 5"), 2);
  EXPECT_EQ(eval("0 ? 2 : 0 ? 4 : 5"), 5);
}

TEST(Expression, NamesAndFunctions) {
  const Bindings tile = {{"BM", 64}, {"BN", 128}, {"BK", 32}, {"M", 1000}, {"N", 4096}};
  EXPECT_EQ(eval("BM*BK*4 + BK*BN*4 <= 49152", tile), 1);
  EXPECT_EQ(eval("BM*BK*4 + BK*BN*4", tile), 24576);
  EXPECT_EQ(eval("ceil_div(M, BM) * ceil_div(N, BN)", tile), 16 * 32);
  EXPECT_EQ(eval("ceil_div(-7, 2)"), -3);
  EXPECT_EQ(eval("min(BM, BN) + max(BM, BN)", tile), 192);
  EXPECT_EQ(eval("BN % BM == 0", tile), 1);
  auto e = Expression::parse("ceil_div(M, BM) + BM + x_1");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->names(), (std::vector<std::string>{"BM", "M", "x_1"}));
}

TEST(Expression, ShortCircuitSkipsUndefinedSides) {
  EXPECT_EQ(eval("0 && 1 / 0"), 0);
  EXPECT_EQ(eval("1 || missing"), 1);
  EXPECT_EQ(eval("BK != 0 && 64 % BK == 0", {{"BK", 0}}), 0);
}

TEST(Expression, ErrorsAreValues) {
  EXPECT_NE(error_of("1 / 0").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("5 % (2 - 2)").find("division by zero"), std::string::npos);
  EXPECT_NE(error_of("9223372036854775807 + 1").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("4611686018427387904 * 4").find("overflow"), std::string::npos);
  EXPECT_NE(error_of("99999999999999999999").find("too large"), std::string::npos);
  EXPECT_NE(error_of("BM * 2").find("no value for 'BM'"), std::string::npos);
  EXPECT_NE(error_of("1 +").find("unexpected end"), std::string::npos);
  EXPECT_NE(error_of("(1 + 2").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("1 2").find("unexpected '2'"), std::string::npos);
  EXPECT_NE(error_of("pow(2, 3)").find("unknown function"), std::string::npos);
  EXPECT_NE(error_of("min(1)").find("takes 2 arguments"), std::string::npos);
  EXPECT_NE(error_of("1 ? 2").find("expected ':'"), std::string::npos);
  EXPECT_NE(error_of("a = 1").find("unexpected '='"), std::string::npos);
  EXPECT_NE(error_of(std::string(500, '(') + "1" + std::string(500, ')')).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(500, '-') + "1").find("nested too deeply"), std::string::npos);
}

} // namespace
} // namespace kcache::compiler
