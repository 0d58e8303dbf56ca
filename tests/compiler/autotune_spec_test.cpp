// Autotune searches: parsing, the space, constraints, strategies' selection.

#include <kcache/compiler/autotune_spec.h>

#include <gtest/gtest.h>

namespace kcache::compiler {
namespace {

constexpr const char* kMatmul = R"json({
  "params": {"BM": [16, 32, 64], "BN": {"range": [16, 64, 16]}, "U": {"pow2": [1, 8]}},
  "constraints": ["BM * BN <= 2048", "M % BM == 0"],
  "benchmark": {
    "shapes": {"M": 96, "N": 128, "K": 64},
    "args": [{"buffer": "A", "count": "M*K", "seed": 1, "range": [-2, 2]},
             {"buffer": "C", "count": "M*N", "output": true},
             {"scalar": "M", "dtype": "i32"}],
    "launch": {"grid": "ceil_div(M, BM)", "block": "BM"},
    "reference": {"BM": 16, "BN": 16, "U": 1},
    "tolerance": 1e-4, "repeats": 3
  }
})json";

TEST(AutotuneSpec, ParsesTheSearch) {
  auto s = parse_autotune(kMatmul);
  ASSERT_TRUE(s.has_value()) << s.error();
  ASSERT_EQ(s->params.size(), 3U);
  EXPECT_EQ(s->params[0].name, "BM");
  EXPECT_EQ(s->params[1].values, (std::vector<std::int64_t>{16, 32, 48, 64}));
  EXPECT_EQ(s->params[2].values, (std::vector<std::int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(s->benchmark.shapes.at("K"), 64);
  ASSERT_EQ(s->benchmark.args.size(), 3U);
  EXPECT_EQ(s->benchmark.args[0].lo, -2);
  EXPECT_TRUE(s->benchmark.args[1].output);
  EXPECT_EQ(s->benchmark.args[2].kind, BenchArg::Kind::kScalar);
  EXPECT_EQ(s->benchmark.args[2].dtype, DType::kI32);
  EXPECT_EQ(s->benchmark.launch.grid->evaluate({{"M", 96}, {"BM", 32}}).value(), 3);
  EXPECT_EQ(s->benchmark.reference.at("BN"), 16);
  EXPECT_EQ(s->benchmark.repeats, 3);
  EXPECT_EQ(s->strategy.kind, Strategy::Kind::kExhaustive);
}

TEST(AutotuneSpec, ConstraintsPruneTheSpace) {
  auto s = parse_autotune(kMatmul);
  ASSERT_TRUE(s.has_value());
  auto space = expand(*s);
  ASSERT_TRUE(space.has_value()) << space.error();
  EXPECT_EQ(space->variants.size() + space->pruned.size(), 3U * 4 * 4);
  for (const Variant& v : space->variants) {
    EXPECT_LE(v.params.at("BM") * v.params.at("BN"), 2048) << v.id;
    EXPECT_EQ(96 % v.params.at("BM"), 0) << v.id;
  }
  // BM=64 never divides M=96; BM=64 with BN=48 is also over 2048 (checked first).
  const auto pruned = [&](const std::string& id) {
    for (const auto& p : space->pruned) {
      if (p.variant.id == id) {
        return p.reason;
      }
    }
    return std::string();
  };
  EXPECT_EQ(pruned("BM=64,BN=16,U=1"), "violates M % BM == 0");
  EXPECT_EQ(pruned("BM=64,BN=48,U=1"), "violates BM * BN <= 2048");
  EXPECT_EQ(space->variants.front().id, "BM=16,BN=16,U=1");
  EXPECT_EQ(space->variants.size(), 2U * 4 * 4) << "BM=16 and BM=32, every BN and U";
}

TEST(AutotuneSpec, RandomAndBudgetSampleReproducibly) {
  std::string text = kMatmul;
  text.insert(text.rfind('}'), R"(, "strategy": {"kind": "random", "k": 5, "seed": 7})");
  auto s = parse_autotune(text);
  ASSERT_TRUE(s.has_value()) << s.error();
  auto a = expand(*s), b = expand(*s);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->variants.size(), 5U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a->variants[i].id, b->variants[i].id);
  }
  text.insert(text.rfind('}'), R"(, "budget": {"max_variants": 3})");
  auto budgeted = expand(*parse_autotune(text));
  EXPECT_EQ(budgeted->variants.size(), 3U);
}

// Every object of a search refuses a member it does not know, naming it and
// its likely meaning: a mistyped "budget" must not search with the defaults.
TEST(AutotuneSpec, UnknownFieldsAreRefusedWhereverTheyAre) {
  const std::string base = kMatmul;
  auto with = [&](std::string_view at, std::string_view insert) {
    std::string text = base;
    text.insert(text.find(at) + at.size(), insert);
    return parse_autotune(text);
  };
  struct Case {
    std::string_view at, insert, expected;
  };
  for (const Case& c : {
           Case{"{\n", R"("budgett": {"max_variants": 3},)", "autotune: unknown field 'budgett'"},
           Case{"\"benchmark\": {", R"("repeat": 3,)", "benchmark: unknown field 'repeat'"},
           Case{"{\"buffer\": \"A\",", R"("cout": "M",)", "args[]: unknown field 'cout'"},
           Case{"\"launch\": {", R"("grid_x": "1",)", "launch: unknown field 'grid_x'"},
       }) {
    auto s = with(c.at, c.insert);
    ASSERT_FALSE(s.has_value()) << c.insert;
    EXPECT_NE(s.error().find(c.expected), std::string::npos) << s.error();
  }
  std::string strategy = base;
  strategy.insert(strategy.rfind('}'), R"(, "strategy": {"kind": "random", "kk": 5})");
  auto s = parse_autotune(strategy);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().find("strategy: unknown field 'kk' (did you mean 'k'?"), std::string::npos)
      << s.error();
}

TEST(AutotuneSpec, VariantSpecsAddTheParametersAsDefines) {
  CompileSpec base;
  base.options = {"-O3"};
  const CompileSpec v = variant_spec(base, Variant{{{"BM", 32}, {"U", 4}}, "BM=32,U=4"});
  EXPECT_EQ(v.options, (std::vector<std::string>{"-O3", "-DBM=32", "-DU=4"}));
  EXPECT_EQ(halving_keep(9, 2), 4U);
  EXPECT_EQ(halving_keep(1, 2), 1U);
}

TEST(AutotuneSpec, ClearErrors) {
  auto error = [](const std::string& text) {
    auto s = parse_autotune(text);
    return s ? std::string() : s.error();
  };
  EXPECT_NE(error("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error(R"({"params": {"BM": [1.5]}, "benchmark": {"args": []}})").find("integers"),
            std::string::npos);
  EXPECT_NE(error(R"({"params": {"A": {"range": [1, 1e30]}}, "benchmark": {"args": []}})")
                .find("integer in range"),
            std::string::npos);
  EXPECT_NE(error(R"({"params": {"A": {"range": [0, 10000000]}}, "benchmark": {"args": []}})")
                .find("at most"),
            std::string::npos);
  EXPECT_NE(error(R"({"params": {"A": [1], "B": {"range": [1, 4000]}, "C": {"range": [1, 4000]}},
                      "benchmark": {"args": []}})")
                .find("over 1000000 points"),
            std::string::npos);
  EXPECT_NE(
      error(R"({"params": {"A": [1]}, "benchmark": {"args": [{"buffer": "x", "count": "4"}]}})")
          .find("output buffer"),
      std::string::npos);
  EXPECT_NE(error(R"({"params": {"A": [1]}, "constraints": ["A <"],
                      "benchmark": {"args": [{"buffer": "x", "count": "4", "output": true}]}})")
                .find("unexpected end"),
            std::string::npos);
  EXPECT_NE(error(R"({"params": {"A": [1]}, "strategy": {"kind": "annealing"},
                      "benchmark": {"args": [{"buffer": "x", "count": "4", "output": true}]}})")
                .find("unknown strategy"),
            std::string::npos);
  auto all_pruned = parse_autotune(R"({"params": {"A": [1, 2]}, "constraints": ["A > 5"],
      "benchmark": {"args": [{"buffer": "x", "count": "4", "output": true}]}})");
  ASSERT_TRUE(all_pruned.has_value());
  EXPECT_NE(expand(*all_pruned).error().find("every variant violates"), std::string::npos);
}

} // namespace
} // namespace kcache::compiler
