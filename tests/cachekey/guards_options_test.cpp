#include <kcache/cachekey/guards.h>
#include <kcache/cachekey/options.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

std::string normalized(std::string_view g, const SymbolMap& symbols = {}) {
  auto out = normalize_guard(g, symbols);
  EXPECT_TRUE(out.has_value()) << (out ? "" : out.error().message);
  return out.value_or("");
}

TEST(Guards, CanonicalSpelling) {
  EXPECT_EQ(normalized("s0%16==0"), "s0 % 16 == 0");
  EXPECT_EQ(normalized("0 == s0 % 16"), "s0 % 16 == 0");
  EXPECT_EQ(normalized("s0 > 2"), "2 < s0");
  EXPECT_EQ(normalized("s0>=2"), "2 <= s0");
  EXPECT_EQ(normalized("2 <= s0 <= 4096"), "2 <= s0 <= 4096"); // chains keep their shape
  EXPECT_EQ(normalized("x.stride( 1 ) == 1"), "x.stride(1) == 1");
  EXPECT_EQ(normalized("-1 == s0"), "s0 == -1");
  EXPECT_EQ(normalized("y.size(0) == s1"), "s1 == y.size(0)");
  EXPECT_EQ(normalized("Eq(Mod(s0, 16), 0)"), "Eq(Mod(s0, 16), 0)");
}

TEST(Guards, SymbolRenamingSkipsAttributes) {
  const SymbolMap symbols{{"batch", "s0"}, {"stride", "s9"}};
  EXPECT_EQ(normalized("batch % 8 == 0", symbols), "s0 % 8 == 0");
  EXPECT_EQ(normalized("x.stride(0) == batch", symbols), "s0 == x.stride(0)");
}

TEST(Guards, SetIsSortedAndDeduplicated) {
  const std::vector<std::string> guards = {"s0 < 9", "s0>1", "s0 < 9", "1<s0"};
  auto out = normalize_guards(guards);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(*out, (std::vector<std::string>{"1 < s0", "s0 < 9"}));
}

TEST(Guards, Errors) {
  EXPECT_FALSE(normalize_guard("").has_value());
  EXPECT_FALSE(normalize_guard("s0 $ 2").has_value());
  EXPECT_FALSE(normalize_guard("(s0 == 2").has_value());
  EXPECT_FALSE(normalize_guard("s0 == 2)").has_value());
}

TEST(Options, DropsOutputPathsKeepsIncludePathsAndWarnings) {
  const std::vector<std::string> flags = {"-O3",
                                          "-I",
                                          "/a",
                                          "-I/b",
                                          "-isystem",
                                          "/c",
                                          "-Wall",
                                          "-w",
                                          "-o",
                                          "x.o",
                                          "-DZ=1",
                                          "-DA",
                                          "-Wl,--as-needed",
                                          "--use_fast_math",
                                          "-DZ=2"};
  // Include paths stay: a client key cannot know what they hold.
  EXPECT_EQ(normalize_options(flags),
            (std::vector<std::string>{"-O3", "--include-path=/a", "--include-path=/b",
                                      "-isystem=/c", "-Wall", "--disable-warnings",
                                      "-Wl,--as-needed", "--use_fast_math", "-DA=1", "-DZ=2"}));
}

TEST(Options, OrderOfOtherFlagsMatters) {
  const std::vector<std::string> a = {"-O3", "-ffast-math"};
  const std::vector<std::string> b = {"-ffast-math", "-O3"};
  EXPECT_NE(options_digest(normalize_options(a)), options_digest(normalize_options(b)));
}

} // namespace
} // namespace kcache::cachekey
