#include <kcache/cachekey/hash_details.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

TEST(HashDetails, ParsesInductorLines) {
  const auto details = parse_hash_details({
      "[abc123] gm: GraphModule()\n\ndef forward(self, x): return x + 1",
      "[def456] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 4]))",
      "[0aa] fx_kwargs[static_input_idxs]: []",
      "not a detail line",
  });
  ASSERT_EQ(details.size(), 4U);
  EXPECT_EQ(details[0].field, "gm");
  EXPECT_EQ(details[0].hash, "abc123");
  EXPECT_EQ(details[0].value.substr(0, 13), "GraphModule()");
  EXPECT_EQ(details[1].field, "example_inputs[0]");
  EXPECT_EQ(details[2].field, "fx_kwargs[static_input_idxs]");
  EXPECT_EQ(details[2].value, "[]");
  EXPECT_EQ(details[3].field, "not a detail line");
  EXPECT_EQ(details[3].hash, "");
}

TEST(HashDetails, NamesOnlyTheFieldsWhoseHashDiffers) {
  const auto a = parse_hash_details({"[h1] gm: graph", "[h2] example_inputs[0]: f32[8, 4]",
                                     "[h3] inductor_config: {max_autotune: False}"});
  const auto b = parse_hash_details({"[h1] gm: graph", "[h9] example_inputs[0]: f32[16, 4]",
                                     "[h3] inductor_config: {max_autotune: False}",
                                     "[h4] user_defined_triton_source: []"});
  const Explanation e = explain_hash_details("fA", a, "fB", b);
  ASSERT_EQ(e.diffs.size(), 2U);
  EXPECT_EQ(e.diffs[0].component, "example_inputs[0]");
  EXPECT_EQ(e.diffs[0].a, "f32[8, 4]");
  EXPECT_EQ(e.diffs[0].b, "f32[16, 4]");
  EXPECT_EQ(e.diffs[1].component, "user_defined_triton_source");
  EXPECT_EQ(e.diffs[1].details.front(), "only in B: []");
  const std::string text = to_text(e);
  EXPECT_NE(text.find("example_inputs[0] differs"), std::string::npos) << text;
  EXPECT_EQ(text.find("gm differs"), std::string::npos) << text;
}

TEST(HashDetails, IdenticalDetailsExplainNothingAndLongValuesAreCut) {
  const std::string big(5000, 'x');
  const auto a = parse_hash_details({"[h1] gm: " + big});
  EXPECT_TRUE(explain_hash_details("fA", a, "fA", a).diffs.empty());
  const auto b = parse_hash_details({"[h2] gm: " + big});
  const Explanation e = explain_hash_details("fA", a, "fB", b);
  ASSERT_EQ(e.diffs.size(), 1U);
  EXPECT_LT(e.diffs[0].details[0].size(), 300U);
  EXPECT_NE(e.diffs[0].details[0].find("(5000 chars)"), std::string::npos);
}

TEST(HashDetails, MultiLineValuesAreShownOnOneLine) {
  const auto a =
      parse_hash_details({"[h1] gm: GraphModule()\n\n\ndef forward(self, x):\n    return x"});
  const auto b =
      parse_hash_details({"[h2] gm: GraphModule()\n\ndef forward(self, y):\n    return y"});
  const Explanation e = explain_hash_details("fA", a, "fB", b);
  ASSERT_EQ(e.diffs.size(), 1U);
  EXPECT_EQ(e.diffs[0].details[0], "A [h1] GraphModule() def forward(self, x): return x");
}

} // namespace
} // namespace kcache::cachekey
