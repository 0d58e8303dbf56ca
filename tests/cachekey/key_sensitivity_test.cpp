// The key-sensitivity matrix: every semantic change must change the key (no
// false hits); every renaming, reordering or duplicate must not (no needless
// misses). Each case edits one thing of a base request.

#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/key_manifest.h>

#include <gtest/gtest.h>

#include <functional>
#include <set>

namespace kcache::cachekey {
namespace {

using testing::BlockSpec;
using testing::make_block;

struct Request {
  BlockSpec block;
  std::string ns = "team-a";
  std::vector<std::string> guards = {"s0 % 16 == 0", "2 <= s0 <= 4096", "x.stride(1) == 1"};
  std::string hardware = "cuda:sm_90a";
  ToolchainFingerprint toolchain =
      ToolchainFingerprint().add("nvrtc", "13.0.88").add("kcache", "kcache-codegen/1");
  std::vector<std::string> options = {"-O3", "--use_fast_math", "-DBLOCK=128", "-DWARPS=4"};
  std::string salt;
  std::optional<std::string> graph_digest_override;
};

std::string key_of(const Request& r) {
  KeyBuilder b;
  b.ns(r.ns)
      .guards(r.guards)
      .hardware(r.hardware)
      .toolchain(r.toolchain)
      .options(r.options)
      .salt(r.salt);
  if (r.graph_digest_override) {
    b.graph_digest(*r.graph_digest_override);
  } else {
    b.graph(make_block(r.block));
  }
  auto manifest = b.build();
  EXPECT_TRUE(manifest.has_value()) << manifest.error().message;
  return manifest ? manifest->key() : std::string();
}

struct Case {
  const char* name;
  bool changes_key;
  std::function<void(Request&)> edit;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // --- semantic changes: the key must change ---
      {"dtype_bf16_to_f16", true, [](Request& r) { r.block.dtype = "f16"; }},
      {"hidden_768_to_1024", true, [](Request& r) { r.block.hidden = 1024; }},
      {"activation_gelu_to_relu", true, [](Request& r) { r.block.activation = "relu"; }},
      {"gelu_approximate_attr", true, [](Request& r) { r.block.gelu_approximate = "none"; }},
      {"layer_norm_eps", true, [](Request& r) { r.block.eps = 1e-6; }},
      {"mm_operand_order", true, [](Request& r) { r.block.swap_mm_operands = true; }},
      {"weight_strides_transposed", true,
       [](Request& r) { r.block.transposed_weight_layout = true; }},
      {"dead_node_added", true, [](Request& r) { r.block.add_dead_node = true; }},
      {"namespace", true, [](Request& r) { r.ns = "team-b"; }},
      {"guard_modulus", true, [](Request& r) { r.guards[0] = "s0 % 8 == 0"; }},
      {"guard_upper_bound", true, [](Request& r) { r.guards[1] = "2 <= s0 <= 8192"; }},
      {"guard_removed", true, [](Request& r) { r.guards.pop_back(); }},
      {"guard_added", true, [](Request& r) { r.guards.push_back("s0 != 7"); }},
      {"guard_stride_dim", true, [](Request& r) { r.guards[2] = "x.stride(0) == 1"; }},
      {"binary_class_sm90_to_sm80", true, [](Request& r) { r.hardware = "cuda:sm_80"; }},
      {"binary_class_sm90a_to_sm90", true, [](Request& r) { r.hardware = "cuda:sm_90"; }},
      {"toolchain_nvrtc_version", true, [](Request& r) { r.toolchain.add("nvrtc", "13.0.89"); }},
      {"toolchain_component_added", true,
       [](Request& r) { r.toolchain.add("torch", "2.11.0+abc"); }},
      {"option_opt_level", true, [](Request& r) { r.options[0] = "-O2"; }},
      {"option_fast_math_removed", true,
       [](Request& r) { r.options.erase(r.options.begin() + 1); }},
      {"define_value", true, [](Request& r) { r.options[2] = "-DBLOCK=64"; }},
      {"define_added", true, [](Request& r) { r.options.push_back("-DDEBUG_CHECKS"); }},
      {"linker_flag_kept", true, [](Request& r) { r.options.push_back("-Wl,--gc-sections"); }},
      {"salt", true, [](Request& r) { r.salt = "rev2"; }},
      {"client_graph_digest", true,
       [](Request& r) { r.graph_digest_override = std::string(64, 'a'); }},
      // --- equivalent spellings: the key must stay ---
      {"node_names", false, [](Request& r) { r.block.rename_nodes = true; }},
      {"independent_node_order", false, [](Request& r) { r.block.swap_add_order = true; }},
      {"symbol_renamed_consistently", false,
       [](Request& r) {
         r.block.batch_symbol = "batch";
         for (auto& g : r.guards) {
           for (std::size_t at = g.find("s0"); at != std::string::npos; at = g.find("s0")) {
             g.replace(at, 2, "batch");
           }
         }
       }},
      {"guard_order", false, [](Request& r) { std::swap(r.guards[0], r.guards[2]); }},
      {"guard_duplicate", false, [](Request& r) { r.guards.push_back(r.guards[0]); }},
      {"guard_whitespace", false, [](Request& r) { r.guards[0] = "s0%16==0"; }},
      {"guard_flipped_equality", false, [](Request& r) { r.guards[0] = "0 == s0 % 16"; }},
      {"guard_leading_zeros", false, [](Request& r) { r.guards[0] = "s0 % 016 == 0"; }},
      {"define_order", false, [](Request& r) { std::swap(r.options[2], r.options[3]); }},
      {"define_split_form", false,
       [](Request& r) {
         r.options[2] = "-D";
         r.options.insert(r.options.begin() + 3, "BLOCK=128");
       }},
      {"include_path", false,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-I", "/home/alice/src"});
       }},
      {"include_path_attached", false, [](Request& r) { r.options.push_back("-I/tmp/build"); }},
      {"output_path", false,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-o", "k.o"});
       }},
      {"warning_flags", false,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-Wall", "-Werror", "-w"});
       }},
      {"verbose_and_diagnostics", false,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-v", "-fdiagnostics-color=always"});
       }},
      {"debug_prefix_map", false,
       [](Request& r) { r.options.push_back("-fdebug-prefix-map=/home/alice=."); }},
      {"guard_flipped_stride_equality", false,
       [](Request& r) { r.guards[2] = "1 == x . stride( 1 )"; }},
      {"toolchain_same_version_readded", false,
       [](Request& r) { r.toolchain.add("nvrtc", "13.0.88"); }},
  };
  return all;
}

class KeySensitivity : public ::testing::TestWithParam<std::size_t> {};

TEST_P(KeySensitivity, KeyChangesExactlyWhenSemanticsDo) {
  const Case& c = cases()[GetParam()];
  const Request base;
  Request edited;
  c.edit(edited);
  const std::string a = key_of(base);
  const std::string b = key_of(edited);
  ASSERT_TRUE(is_valid_key(a));
  ASSERT_TRUE(is_valid_key(b));
  if (c.changes_key) {
    EXPECT_NE(a, b) << c.name << ": a semantic change kept the key (false hit)";
  } else {
    EXPECT_EQ(a, b) << c.name << ": an equivalent spelling changed the key (needless miss)";
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, KeySensitivity, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const auto& p) { return std::string(cases()[p.param].name); });

TEST(KeySensitivity, MatrixIsLargeEnough) {
  EXPECT_GE(cases().size(), 30U);
}

TEST(GraphDigest, TwelveIdenticalBlocksShareOneKey) {
  std::set<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    BlockSpec spec;
    spec.name_prefix = "layers." + std::to_string(i) + ".";
    keys.insert(
        KeyBuilder().ns("m").graph(make_block(spec)).hardware("cuda:sm_90a").build()->key());
  }
  EXPECT_EQ(keys.size(), 1U);
}

TEST(GraphDigest, ExplicitRowMajorStridesEqualImplicit) {
  Graph a, b;
  a.add_input("x", TensorType{"f32", {Dim::fixed(4), Dim::fixed(8)}, {}});
  b.add_input("x",
              TensorType{"f32", {Dim::fixed(4), Dim::fixed(8)}, {Dim::fixed(8), Dim::fixed(1)}});
  EXPECT_EQ(digest_graph(a).root, digest_graph(b).root);
}

TEST(GraphDigest, GraphInputOrderMatters) {
  Graph a, b;
  a.add_input("x", TensorType{"f32", {Dim::fixed(4)}, {}});
  a.add_input("y", TensorType{"f16", {Dim::fixed(4)}, {}});
  b.add_input("y", TensorType{"f16", {Dim::fixed(4)}, {}});
  b.add_input("x", TensorType{"f32", {Dim::fixed(4)}, {}});
  EXPECT_NE(digest_graph(a).root, digest_graph(b).root);
}

TEST(GraphDigest, SymbolsAreNamedByFirstAppearance) {
  Graph g;
  g.add_input("x", TensorType{"f32", {Dim::symbol("batch"), Dim::symbol("seq")}, {}});
  const auto d = digest_graph(g);
  EXPECT_EQ(d.symbols.at("batch"), "s0");
  EXPECT_EQ(d.symbols.at("seq"), "s1");
}

TEST(GraphBuilder, RejectsDanglingReferences) {
  Graph g;
  const auto x = g.add_input("x", TensorType{"f32", {Dim::fixed(1)}, {}});
  EXPECT_FALSE(g.add_node("bad", "aten.relu", {{x + 5, 0}}, {}).has_value());
  EXPECT_FALSE(g.add_node("bad", "aten.relu", {{x, 3}}, {}).has_value());
  EXPECT_FALSE(g.add_node("bad", "", {{x, 0}}, {}).has_value());
  EXPECT_FALSE(g.add_output({x, 1}).has_value());
}

} // namespace
} // namespace kcache::cachekey
