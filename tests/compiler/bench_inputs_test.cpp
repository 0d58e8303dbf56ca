// Benchmark inputs in the 16-bit float formats (bf16, f16): what a search's
// buffers hold (rounded to nearest even from the same draws as f32), how
// they read back as doubles, and how outputs compare.

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/bench_inputs.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace kcache::compiler {
namespace {

// One buffer of `count` elements of `dtype`, uniform in [lo, hi], seed 3.
BenchmarkSpec one_buffer(const std::string& dtype, double lo, double hi, int count = 4096) {
  const nlohmann::json search = {
      {"params", {{"U", {1}}}},
      {"benchmark",
       {{"args",
         {{{"buffer", "x"}, {"dtype", dtype}, {"count", count}, {"seed", 3}, {"range", {lo, hi}}},
          {{"buffer", "y"}, {"dtype", dtype}, {"count", 4}, {"output", true}}}},
        {"tolerance", 1e-2},
        {"rotate", 1}}}};
  auto parsed = parse_autotune(search.dump());
  EXPECT_TRUE(parsed.has_value()) << parsed.error();
  return parsed ? parsed->benchmark : BenchmarkSpec{};
}

std::vector<std::uint8_t> input_bytes(const BenchmarkSpec& bench) {
  auto args = make_host_args(bench, {});
  EXPECT_TRUE(args.has_value()) << args.error();
  return args ? args->front().sets.front() : std::vector<std::uint8_t>{};
}

std::uint16_t first_bits(const BenchmarkSpec& bench) {
  const auto bytes = input_bytes(bench);
  std::uint16_t bits = 0;
  std::memcpy(&bits, bytes.data(), sizeof bits);
  return bits;
}

TEST(BenchInputs, SixteenBitBuffersAreTheF32DrawsRoundedToNearest) {
  const auto f32 = input_bytes(one_buffer("f32", -3, 3));
  for (const auto& [dtype, name, mantissa_bits] :
       {std::tuple{DType::kBF16, "bf16", 8}, std::tuple{DType::kF16, "f16", 11}}) {
    const auto bytes = input_bytes(one_buffer(name, -3, 3));
    ASSERT_EQ(bytes.size(), 4096U * 2) << name;
    int distinct = 0;
    double previous = 0;
    for (std::size_t i = 0; i < 4096; ++i) {
      const double want = element_value(DType::kF32, f32, i);
      const double got = element_value(dtype, bytes, i);
      // Within half a unit in the last place of the format's precision (f16's
      // subnormals are 2^-24 apart).
      const double ulp =
          std::max(want == 0 ? 0 : std::ldexp(1.0, std::ilogb(want) - (mantissa_bits - 1)),
                   dtype == DType::kF16 ? std::ldexp(1.0, -24) : 0.0);
      ASSERT_LE(std::fabs(got - want), ulp / 2) << name << " element " << i << ": " << want;
      distinct += got != previous ? 1 : 0;
      previous = got;
    }
    EXPECT_GT(distinct, 3000) << name; // random draws, not one value
  }
}

TEST(BenchInputs, SixteenBitRoundingAndDecoding) {
  // A range [v, v] draws v: its encoding shows the rounding.
  EXPECT_EQ(first_bits(one_buffer("bf16", -2.5, -2.5)), 0xc020);
  EXPECT_EQ(first_bits(one_buffer("bf16", 1 + std::ldexp(1, -8), 1 + std::ldexp(1, -8))),
            0x3f80); // a tie goes to the even neighbour, 1
  EXPECT_EQ(first_bits(one_buffer("bf16", 1 + 3 * std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8))),
            0x3f82); // a tie, up to the even neighbour
  EXPECT_EQ(first_bits(one_buffer("f16", 1, 1)), 0x3c00);
  EXPECT_EQ(first_bits(one_buffer("f16", 65504, 65504)), 0x7bff);       // the largest finite
  EXPECT_EQ(first_bits(one_buffer("f16", 65520, 65520)), 0x7c00);       // a tie above it: inf
  EXPECT_EQ(first_bits(one_buffer("f16", 1e-7, 1e-7)), 0x0002);         // subnormal: 2 x 2^-24
  EXPECT_EQ(first_bits(one_buffer("f16", -1e-9, -1e-9)), 0x8000);       // under half of 2^-24
  EXPECT_EQ(first_bits(one_buffer("f16", 6.1e-5, 6.1e-5)), 0x03ff);     // 1023.4 x 2^-24
  EXPECT_EQ(first_bits(one_buffer("f16", 6.103e-5, 6.103e-5)), 0x0400); // up to 2^-14, normal
  auto decode = [](DType d, std::uint16_t bits) {
    std::vector<std::uint8_t> bytes(2);
    std::memcpy(bytes.data(), &bits, 2);
    return element_value(d, bytes, 0);
  };
  EXPECT_EQ(decode(DType::kBF16, 0x3f80), 1.0);
  EXPECT_EQ(decode(DType::kBF16, 0xc020), -2.5);
  EXPECT_EQ(decode(DType::kF16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(decode(DType::kF16, 0x7bff), 65504.0);
  EXPECT_EQ(decode(DType::kF16, 0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(decode(DType::kF16, 0x7e00)));
}

TEST(BenchInputs, SixteenBitOutputsCompareAsDoublesWithinTheTolerance) {
  const BenchmarkSpec bench = one_buffer("bf16", -1, 1); // tolerance 1e-2
  auto bf16 = [](std::initializer_list<std::uint16_t> bits) {
    std::vector<std::uint8_t> bytes(bits.size() * 2);
    std::memcpy(bytes.data(), std::data(bits), bytes.size());
    return OutputBytes{bytes};
  };
  const OutputBytes want = bf16({0x4120, 0x3f80, 0xc020, 0x0000}); // 10, 1, -2.5, 0
  bool ok = true;
  EXPECT_EQ(compare_outputs(bench, want, want, ok), 0);
  EXPECT_TRUE(ok);
  ok = true; // one unit in the last place of 10 (0.0625) is within 1e-2 x 11
  EXPECT_EQ(compare_outputs(bench, bf16({0x4121, 0x3f80, 0xc020, 0x0000}), want, ok), 0.0625);
  EXPECT_TRUE(ok);
  ok = true; // 1.125 for 1 is not
  EXPECT_EQ(compare_outputs(bench, bf16({0x4120, 0x3f90, 0xc020, 0x0000}), want, ok), 0.125);
  EXPECT_FALSE(ok);
  ok = true;
  compare_outputs(bench, bf16({0x4120, 0x3f80, 0xc020, 0x7fc0}), want, ok); // NaN
  EXPECT_FALSE(ok);
}

TEST(BenchInputs, SixteenBitFloatsAreBufferDtypesOnly) {
  auto search = parse_autotune(R"({"params": {"U": [1]}, "benchmark": {"args": [
      {"buffer": "y", "dtype": "f16", "count": "4", "output": true},
      {"scalar": "U", "dtype": "bf16"}]}})");
  ASSERT_FALSE(search.has_value());
  EXPECT_NE(search.error().find("bf16 and f16 are buffer dtypes"), std::string::npos)
      << search.error();
  EXPECT_EQ(dtype_size(DType::kBF16), 2U);
  EXPECT_EQ(dtype_size(DType::kF16), 2U);
}

TEST(BenchInputs, LargeBuffersFilledByThreadsHoldTheSameDrawsAsOneThread) {
  // Over 4·2^22 elements: filled in ranges by several threads. Element i is
  // splitmix64's (i+1)-th draw from the seed, whichever thread wrote it.
  const std::size_t count = (std::size_t{4} << 22) + 12345;
  const auto bytes = input_bytes(one_buffer("f32", -3, 3, static_cast<int>(count)));
  ASSERT_EQ(bytes.size(), count * 4);
  auto draw = [](std::uint64_t i) {
    std::uint64_t z = 3 + (i + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<float>(-3 + 6 * (static_cast<double>(z >> 11) * 0x1.0p-53));
  };
  for (std::size_t i = 0; i < count; i += (i % 4096 == 0 ? 1 : 4093)) {
    ASSERT_EQ(element_value(DType::kF32, bytes, i), static_cast<double>(draw(i))) << i;
  }
  for (std::size_t i : {count / 4 - 1, count / 4, count / 2, count - 1}) { // range edges
    ASSERT_EQ(element_value(DType::kF32, bytes, i), static_cast<double>(draw(i))) << i;
  }
}

} // namespace
} // namespace kcache::compiler
