#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/graph_json.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

constexpr const char* kMlp = R"({
  "format": "kcache-graph/1",
  "inputs": [
    {"name": "x", "type": {"dtype": "f32", "shape": ["batch", 64]}},
    {"name": "w", "type": {"dtype": "f32", "shape": [64, 32], "strides": [1, 64]}}
  ],
  "nodes": [
    {"name": "relu", "op": "aten.relu", "inputs": ["mm"],
     "outputs": [{"dtype": "f32", "shape": ["batch", 32]}]},
    {"name": "mm", "op": "aten.mm", "inputs": ["x", "w"], "attrs": {"alpha": 1.0, "tags": ["a", 2]},
     "outputs": [{"dtype": "f32", "shape": ["batch", 32]}]}
  ],
  "outputs": ["relu"]
})";

TEST(GraphJson, ParsesNodesInAnyOrder) {
  auto g = parse_graph_json(kMlp);
  ASSERT_TRUE(g.has_value()) << g.error().message;
  EXPECT_EQ(g->nodes().size(), 4U);
  EXPECT_EQ(g->inputs().size(), 2U);
  ASSERT_EQ(g->outputs().size(), 1U);
  EXPECT_EQ(g->nodes()[g->outputs()[0].node].op, "aten.relu");
}

TEST(GraphJson, RoundTripKeepsDigest) {
  auto g = parse_graph_json(kMlp);
  ASSERT_TRUE(g.has_value());
  auto again = parse_graph_json(graph_to_json(*g));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(digest_graph(*g).root, digest_graph(*again).root);

  const Graph block = testing::make_block();
  auto block_again = parse_graph_json(graph_to_json(block));
  ASSERT_TRUE(block_again.has_value()) << block_again.error().message;
  EXPECT_EQ(digest_graph(block).root, digest_graph(*block_again).root);
}

struct BadGraph {
  const char* name;
  const char* text;
  const char* message_part;
};

class GraphJsonErrors : public ::testing::TestWithParam<BadGraph> {};

TEST_P(GraphJsonErrors, ClearMessage) {
  auto g = parse_graph_json(GetParam().text);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message.find(GetParam().message_part), std::string::npos)
      << g.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Bad, GraphJsonErrors,
    ::testing::Values(
        BadGraph{"not_json", "{nope", "not valid JSON"},
        BadGraph{"not_object", "[1,2]", "JSON object"},
        BadGraph{"format", R"({"format":"other/9"})", "unsupported graph format"},
        // Found by parsers_fuzzer: fields of the wrong JSON type.
        BadGraph{"format_array", R"({"format":[1]})", "graph:"},
        BadGraph{"inputs_string", R"({"inputs":"x"})", "input"},
        BadGraph{"shape_string",
                 R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":"big"}}]})", "shape"},
        BadGraph{
            "cycle",
            R"({"nodes":[{"name":"a","op":"f","inputs":["b"]},{"name":"b","op":"f","inputs":["a"]}]})",
            "cycle"},
        BadGraph{"unknown_ref", R"({"nodes":[{"name":"a","op":"f","inputs":["zz"]}]})",
                 "unknown node 'zz'"},
        BadGraph{"duplicate", R"({"nodes":[{"name":"a","op":"f"},{"name":"a","op":"g"}]})",
                 "duplicate"},
        BadGraph{
            "bad_output_index",
            R"({"nodes":[{"name":"a","op":"f","outputs":[{"dtype":"f32"}]},{"name":"b","op":"g","inputs":["a:3"]}]})",
            "no output 3"},
        BadGraph{"bad_dim", R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[1.5]}}]})",
                 "shape entries"},
        BadGraph{"rank_mismatch",
                 R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[2,2],"strides":[1]}}]})",
                 "differ in rank"},
        BadGraph{"missing_op", R"({"nodes":[{"name":"a"}]})", "\"op\""},
        BadGraph{"bad_attr", R"({"nodes":[{"name":"a","op":"f","attrs":{"k":{"x":1}}}]})",
                 "attribute values"},
        // Integers are int64: never wrapped, never read as doubles.
        BadGraph{
            "dim_beyond_uint64",
            R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[99999999999999999999]}}]})",
            "99999999999999999999 at offset"},
        BadGraph{
            "stride_uint64_max",
            R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[2],"strides":[18446744073709551615]}}]})",
            "outside the int64 range"},
        BadGraph{
            "stride_int64_max_plus_one",
            R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[2],"strides":[9223372036854775808]}}]})",
            "outside the int64 range"},
        BadGraph{"attr_beyond_int64",
                 R"({"nodes":[{"name":"a","op":"f","attrs":{"k":9223372036854775808}}]})",
                 "outside the int64 range"},
        BadGraph{"attr_below_int64",
                 R"({"nodes":[{"name":"a","op":"f","attrs":{"k":[1,-9223372036854775809]}}]})",
                 "outside the int64 range"},
        // nlohmann refuses a float beyond double range itself.
        BadGraph{"attr_float_overflow", R"({"nodes":[{"name":"a","op":"f","attrs":{"k":1e400}}]})",
                 "not valid JSON"},
        BadGraph{"effectful_not_bool", R"({"nodes":[{"name":"a","op":"f","effectful":1}]})",
                 "\"effectful\""}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(GraphJson, Int64EdgesAndNumbersInStringsAreAccepted) {
  auto g = parse_graph_json(R"({"inputs":[{"name":"99999999999999999999","type":{"dtype":"f32",
      "shape":[9223372036854775807],"strides":[-9223372036854775808]}}],
      "nodes":[{"name":"a","op":"f","attrs":{"big":9223372036854775807,"esc":"\\\"99999999999999999999"}}]})");
  ASSERT_TRUE(g.has_value()) << g.error().message;
  EXPECT_EQ(g->nodes()[0].outputs[0].shape[0], Dim::fixed(INT64_MAX));
  EXPECT_EQ(g->nodes()[0].outputs[0].strides[0], Dim::fixed(INT64_MIN));
}

TEST(GraphJson, FloatAttributesStayFloatsAndExact) {
  auto one = parse_graph_json(R"({"nodes":[{"name":"a","op":"f","attrs":{"k":1.0}}]})");
  auto one_int = parse_graph_json(R"({"nodes":[{"name":"a","op":"f","attrs":{"k":1}}]})");
  auto tiny =
      parse_graph_json(R"({"nodes":[{"name":"a","op":"f","attrs":{"k":1.0000000000000002}}]})");
  ASSERT_TRUE(one && one_int && tiny);
  EXPECT_TRUE(std::holds_alternative<double>(one->nodes()[0].attrs.at("k").value));
  EXPECT_NE(digest_graph(*one).root, digest_graph(*one_int).root);
  EXPECT_NE(digest_graph(*one).root, digest_graph(*tiny).root);
  auto again = parse_graph_json(graph_to_json(*tiny));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(digest_graph(*tiny).root, digest_graph(*again).root);
}

TEST(GraphJson, EffectfulFlagRoundTrips) {
  constexpr const char* kText = R"({"inputs":[{"name":"x","type":{"dtype":"f32","shape":[4]}}],
    "nodes":[{"name":"a","op":"mylib.sample","inputs":["x"],"effectful":true,
              "outputs":[{"dtype":"f32","shape":[4]}]},
             {"name":"b","op":"mylib.sample","inputs":["x"],"effectful":false,
              "outputs":[{"dtype":"f32","shape":[4]}]}],
    "outputs":["a","b"]})";
  auto g = parse_graph_json(kText);
  ASSERT_TRUE(g.has_value()) << g.error().message;
  EXPECT_TRUE(g->nodes()[1].effectful);
  EXPECT_FALSE(g->nodes()[2].effectful);
  auto again = parse_graph_json(graph_to_json(*g));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_TRUE(again->nodes()[1].effectful);
  EXPECT_EQ(digest_graph(*g).root, digest_graph(*again).root);
}

// A node named before it is listed is added first; that must never move it
// (or what it reads) across an effect, which keeps the order of the file.
std::string effects_doc(const std::vector<std::string>& nodes) {
  const std::string t = R"("outputs":[{"dtype":"f32","shape":[4]}])";
  auto node = [&](const std::string& spec) { // "name=op(inputs)"
    const auto eq = spec.find('='), open = spec.find('(');
    std::string inputs;
    for (std::size_t at = open + 1; at < spec.size() - 1;) {
      const auto comma = std::min(spec.find(',', at), spec.size() - 1);
      inputs += (inputs.empty() ? "\"" : ",\"") + spec.substr(at, comma - at) + "\"";
      at = comma + 1;
    }
    return R"({"name":")" + spec.substr(0, eq) + R"(","op":")" +
           spec.substr(eq + 1, open - eq - 1) + R"(","inputs":[)" + inputs + "]," + t + "}";
  };
  std::string text = R"({"inputs":[{"name":"q","type":{"dtype":"f32","shape":[4]}}],"nodes":[)";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    text += (i ? "," : "") + node(nodes[i]);
  }
  return text + R"(],"outputs":["p","e1"]})";
}

TEST(GraphJson, ForwardReferencesNeverReorderEffects) {
  // [p(reads e2), e1, e2] said e1 before e2; placing e2 first for p hashed it
  // like [e2, p, e1].
  auto hoisted = parse_graph_json(
      effects_doc({"p=aten.relu(e2)", "e1=aten.rand_like(q)", "e2=aten.randn_like(q)"}));
  ASSERT_FALSE(hoisted.has_value());
  EXPECT_NE(hoisted.error().message.find("effectful node 'e2'"), std::string::npos)
      << hoisted.error().message;
  // A pure node listed after an effect, named by one listed before it, would
  // carry what it reads across the effect too.
  auto carried = parse_graph_json(effects_doc(
      {"p=aten.relu(m)", "e1=aten.rand_like(q)", "e2=aten.randn_like(q)", "m=aten.neg(e2)"}));
  ASSERT_FALSE(carried.has_value());
  EXPECT_NE(carried.error().message.find("'m', listed after an effectful node"), std::string::npos)
      << carried.error().message;
  // The flag and in-place ops count as effects as well.
  EXPECT_FALSE(parse_graph_json(effects_doc({"p=aten.relu(e2)", "e1=aten.rand_like(q)",
                                             "e2=aten.add_.Tensor(q,q)"}))
                   .has_value());
  // Written in program order, both orders parse and differ.
  auto e1_first = parse_graph_json(
      effects_doc({"e1=aten.rand_like(q)", "e2=aten.randn_like(q)", "p=aten.relu(e2)"}));
  auto e2_first = parse_graph_json(
      effects_doc({"e2=aten.randn_like(q)", "p=aten.relu(e2)", "e1=aten.rand_like(q)"}));
  ASSERT_TRUE(e1_first && e2_first);
  EXPECT_NE(digest_graph(*e1_first).root, digest_graph(*e2_first).root);
  // Forward references between effects' neighbours that cross none still work.
  auto pure_forward = parse_graph_json(effects_doc(
      {"e1=aten.rand_like(q)", "p=aten.relu(m)", "m=aten.neg(e1)", "e2=aten.randn_like(q)"}));
  ASSERT_TRUE(pure_forward.has_value()) << pure_forward.error().message;
  auto pure_backward = parse_graph_json(effects_doc(
      {"e1=aten.rand_like(q)", "m=aten.neg(e1)", "p=aten.relu(m)", "e2=aten.randn_like(q)"}));
  ASSERT_TRUE(pure_backward.has_value());
  EXPECT_EQ(digest_graph(*pure_forward).root, digest_graph(*pure_backward).root);
}

TEST(GraphJson, DeepChainDoesNotOverflowTheStack) {
  std::string text = R"({"inputs":[{"name":"n0","type":{"dtype":"f32","shape":[1]}}],"nodes":[)";
  constexpr int kDepth = 20000;
  // Listed in reverse so the parser must resolve a 20000-deep dependency chain.
  for (int i = kDepth; i >= 1; --i) {
    text += R"({"name":"n)" + std::to_string(i) + R"(","op":"neg","inputs":["n)" +
            std::to_string(i - 1) + R"("],"outputs":[{"dtype":"f32","shape":[1]}]})";
    text += i > 1 ? "," : "";
  }
  text += "]}";
  auto g = parse_graph_json(text);
  ASSERT_TRUE(g.has_value()) << g.error().message;
  EXPECT_EQ(g->nodes().size(), static_cast<std::size_t>(kDepth + 1));
}

} // namespace
} // namespace kcache::cachekey
