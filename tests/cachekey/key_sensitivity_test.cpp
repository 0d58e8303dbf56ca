// The key-sensitivity matrix: every semantic change must change the key (no
// false hits); every renaming, reordering or duplicate must not (no needless
// misses); input the key cannot represent exactly must be refused. Each case
// edits one thing of a base request (after an optional setup applied to both
// sides); a failing case prints explain()'s answer.

#include "test_graphs.h"

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/graph_json.h>
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
  std::optional<std::string> graph_json; // replaces the block graph when set
  std::string ns = "team-a";
  std::vector<std::string> guards = {"s0 % 16 == 0", "2 <= s0 <= 4096", "x.stride(1) == 1"};
  std::string hardware = "cuda:sm_90a";
  ToolchainFingerprint toolchain =
      ToolchainFingerprint().add("nvrtc", "13.0.88").add("kcache", "kcache-codegen/1");
  std::vector<std::string> options = {"-O3", "--use_fast_math", "-DBLOCK=128", "-DWARPS=4"};
  std::string salt;
  std::optional<std::string> graph_digest_override;
};

tl::expected<KeyManifest, std::string> manifest_of(const Request& r) {
  KeyBuilder b;
  b.ns(r.ns)
      .guards(r.guards)
      .hardware(r.hardware)
      .toolchain(r.toolchain)
      .options(r.options)
      .salt(r.salt);
  if (r.graph_digest_override) {
    b.graph_digest(*r.graph_digest_override);
  } else if (r.graph_json) {
    auto graph = parse_graph_json(*r.graph_json);
    if (!graph) {
      return tl::unexpected("graph: " + graph.error().message);
    }
    b.graph(*graph);
  } else {
    b.graph(make_block(r.block));
  }
  auto manifest = b.build();
  if (!manifest) {
    return tl::unexpected(manifest.error().message);
  }
  return *manifest;
}

enum Expect { kDiffer, kMatch, kRefuse };

struct Case {
  const char* name;
  Expect expect;
  std::function<void(Request&)> edit;       // applied to side B
  std::function<void(Request&)> setup = {}; // applied to both sides first
};

// Replaces the one occurrence of `from` in `text`; a typo in a case fails loudly.
void replace(std::string& text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "'" << from << "' not in " << text;
  ASSERT_EQ(text.find(from, at + 1), std::string::npos) << "'" << from << "' twice in " << text;
  text.replace(at, from.size(), to);
}

std::function<void(Request&)> edit_graph(const std::string& from, const std::string& to) {
  return [from, to](Request& r) { replace(*r.graph_json, from, to); };
}
std::function<void(Request&)> set_guards(const std::vector<std::string>& guards) {
  return [guards](Request& r) { r.guards = guards; };
}
std::function<void(Request&)> use_graph(const char* json,
                                        const std::vector<std::string>& guards = {}) {
  return [json, guards](Request& r) {
    r.graph_json = json;
    r.guards = guards;
  };
}
std::function<void(Request&)> no_graph(const std::vector<std::string>& guards) {
  return [guards](Request& r) {
    r.graph_digest_override = std::string(64, 'e');
    r.guards = guards;
  };
}

std::vector<Case> block_cases() {
  return {
      // --- semantic changes: the key must change ---
      {"dtype_bf16_to_f16", kDiffer, [](Request& r) { r.block.dtype = "f16"; }},
      {"hidden_768_to_1024", kDiffer, [](Request& r) { r.block.hidden = 1024; }},
      {"activation_gelu_to_relu", kDiffer, [](Request& r) { r.block.activation = "relu"; }},
      {"gelu_approximate_attr", kDiffer, [](Request& r) { r.block.gelu_approximate = "none"; }},
      {"layer_norm_eps", kDiffer, [](Request& r) { r.block.eps = 1e-6; }},
      {"mm_operand_order", kDiffer, [](Request& r) { r.block.swap_mm_operands = true; }},
      {"weight_strides_transposed", kDiffer,
       [](Request& r) { r.block.transposed_weight_layout = true; }},
      {"dead_node_added", kDiffer, [](Request& r) { r.block.add_dead_node = true; }},
      {"namespace", kDiffer, [](Request& r) { r.ns = "team-b"; }},
      {"guard_modulus", kDiffer, [](Request& r) { r.guards[0] = "s0 % 8 == 0"; }},
      {"guard_upper_bound", kDiffer, [](Request& r) { r.guards[1] = "2 <= s0 <= 8192"; }},
      {"guard_removed", kDiffer, [](Request& r) { r.guards.pop_back(); }},
      {"guard_added", kDiffer, [](Request& r) { r.guards.push_back("s0 != 7"); }},
      {"guard_stride_dim", kDiffer, [](Request& r) { r.guards[2] = "x.stride(0) == 1"; }},
      {"binary_class_sm90_to_sm80", kDiffer, [](Request& r) { r.hardware = "cuda:sm_80"; }},
      {"binary_class_sm90a_to_sm90", kDiffer, [](Request& r) { r.hardware = "cuda:sm_90"; }},
      {"toolchain_nvrtc_version", kDiffer, [](Request& r) { r.toolchain.add("nvrtc", "13.0.89"); }},
      {"toolchain_component_added", kDiffer,
       [](Request& r) { r.toolchain.add("torch", "2.11.0+abc"); }},
      {"option_opt_level", kDiffer, [](Request& r) { r.options[0] = "-O2"; }},
      {"option_fast_math_removed", kDiffer,
       [](Request& r) { r.options.erase(r.options.begin() + 1); }},
      {"define_value", kDiffer, [](Request& r) { r.options[2] = "-DBLOCK=64"; }},
      {"define_added", kDiffer, [](Request& r) { r.options.push_back("-DDEBUG_CHECKS"); }},
      {"linker_flag_kept", kDiffer, [](Request& r) { r.options.push_back("-Wl,--gc-sections"); }},
      {"salt", kDiffer, [](Request& r) { r.salt = "rev2"; }},
      {"client_graph_digest", kDiffer,
       [](Request& r) { r.graph_digest_override = std::string(64, 'a'); }},
      // --- equivalent spellings: the key must stay ---
      // Guards name graph inputs, so renaming the inputs renames them in guards too.
      {"node_names", kMatch,
       [](Request& r) {
         r.block.rename_nodes = true;
         r.guards[2] = "renamed_x.stride(1) == 1";
       }},
      {"independent_node_order", kMatch, [](Request& r) { r.block.swap_add_order = true; }},
      {"symbol_renamed_consistently", kMatch,
       [](Request& r) {
         r.block.batch_symbol = "batch";
         for (auto& g : r.guards) {
           for (std::size_t at = g.find("s0"); at != std::string::npos; at = g.find("s0")) {
             g.replace(at, 2, "batch");
           }
         }
       }},
      {"guard_order", kMatch, [](Request& r) { std::swap(r.guards[0], r.guards[2]); }},
      {"guard_duplicate", kMatch, [](Request& r) { r.guards.push_back(r.guards[0]); }},
      {"guard_whitespace", kMatch, [](Request& r) { r.guards[0] = "s0%16==0"; }},
      {"guard_flipped_equality", kMatch, [](Request& r) { r.guards[0] = "0 == s0 % 16"; }},
      // C reads 016 as octal 14, Python refuses it: refused.
      {"guard_leading_zeros", kRefuse, [](Request& r) { r.guards[0] = "s0 % 016 == 0"; }},
      {"guard_octal_literal", kMatch, [](Request& r) { r.guards[0] = "s0 % 0o20 == 0"; }},
      {"define_order", kMatch, [](Request& r) { std::swap(r.options[2], r.options[3]); }},
      {"define_split_form", kMatch,
       [](Request& r) {
         r.options[2] = "-D";
         r.options.insert(r.options.begin() + 3, "BLOCK=128");
       }},
      // A client key cannot see what an include path holds: the path is keyed.
      {"include_path", kDiffer,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-I", "/home/alice/src"});
       }},
      {"include_path_attached", kDiffer, [](Request& r) { r.options.push_back("-I/tmp/build"); }},
      {"output_path", kMatch,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-o", "k.o"});
       }},
      // Warning flags are keyed: -Wno-deprecated undefines __DEPRECATED.
      {"warning_flags", kDiffer,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-Wall", "-Werror", "-w"});
       }},
      {"verbose_and_diagnostics", kDiffer,
       [](Request& r) {
         r.options.insert(r.options.end(), {"-v", "-fdiagnostics-color=always"});
       }},
      // Path maps change __FILE__ and debug info: keyed.
      {"debug_prefix_map", kDiffer,
       [](Request& r) { r.options.push_back("-fdebug-prefix-map=/home/alice=."); }},
      {"guard_flipped_stride_equality", kMatch,
       [](Request& r) { r.guards[2] = "1 == x . stride( 1 )"; }},
      {"toolchain_same_version_readded", kMatch,
       [](Request& r) { r.toolchain.add("nvrtc", "13.0.88"); }},
  };
}

// Two inputs of one type, used symmetrically: the graph digest alone cannot
// tell which is which, the guards must.
constexpr const char* kTwoInputs = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": ["n", 64]}},
             {"name": "y", "type": {"dtype": "f32", "shape": ["n", 64]}}],
  "nodes": [{"name": "sum", "op": "aten.add", "inputs": ["x", "y"],
             "outputs": [{"dtype": "f32", "shape": ["n", 64]}]}],
  "outputs": ["sum"]})";

constexpr const char* kOneOp = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": ["b", "n"]}}],
  "nodes": [{"name": "act", "op": "aten.leaky_relu", "inputs": ["x"], "attrs": {"slope": 0.1},
             "outputs": [{"dtype": "f32", "shape": ["b", "n"]}]}],
  "outputs": ["act"]})";

constexpr const char* kTwoRandoms = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": ["n", 64]}}],
  "nodes": [
    {"name": "r1", "op": "aten.rand_like", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": ["n", 64]}]},
    {"name": "r2", "op": "aten.rand_like", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": ["n", 64]}]},
    {"name": "p1", "op": "aten.relu", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": ["n", 64]}]},
    {"name": "p2", "op": "aten.neg", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": ["n", 64]}]},
    {"name": "sum", "op": "aten.add", "inputs": ["r1", "r2"], "outputs": [{"dtype": "f32", "shape": ["n", 64]}]}],
  "outputs": ["sum", "p1", "p2"]})";

constexpr const char* kTwoEffects = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": [8]}}],
  "nodes": [
    {"name": "e1", "op": "mylib.sample", "inputs": ["x"], "effectful": true, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "e2", "op": "mylib.sample", "inputs": ["x"], "effectful": true, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "sum", "op": "aten.add", "inputs": ["e1", "e2"], "outputs": [{"dtype": "f32", "shape": [8]}]}],
  "outputs": ["sum"]})";

constexpr const char* kInPlace = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": [8]}}],
  "nodes": [
    {"name": "read", "op": "aten.relu", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "add", "op": "aten.add_.Scalar", "inputs": ["x"], "attrs": {"other": 1}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "mul", "op": "aten.mul_.Scalar", "inputs": ["x"], "attrs": {"other": 2}, "outputs": [{"dtype": "f32", "shape": [8]}]}],
  "outputs": ["read"]})";

constexpr const char* kCollectives = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": [8]}}],
  "nodes": [
    {"name": "a1", "op": "_c10d_functional.all_reduce", "inputs": ["x"], "attrs": {"op": "sum"}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "a2", "op": "_c10d_functional.all_reduce", "inputs": ["x"], "attrs": {"op": "sum"}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "cat", "op": "aten.cat", "inputs": ["a1", "a2"], "outputs": [{"dtype": "f32", "shape": [16]}]}],
  "outputs": ["cat"]})";

// Two look-alike pure nodes, one written in place: which one a reader or an
// output names now matters (the fuzzer in manifest_differential_test.cpp found
// them merged by content).
constexpr const char* kWrittenLookAlike = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": [8]}}],
  "nodes": [
    {"name": "a", "op": "aten.mul", "inputs": ["x", "x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "b", "op": "aten.mul", "inputs": ["x", "x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "write", "op": "aten.add_.Scalar", "inputs": ["a"], "attrs": {"other": 1}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "read", "op": "aten.neg", "inputs": ["b"], "outputs": [{"dtype": "f32", "shape": [8]}]}],
  "outputs": ["b", "read"]})";

// The same, written through a view of one of them (a view aliases its base).
constexpr const char* kWrittenThroughView = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": [8]}}],
  "nodes": [
    {"name": "a", "op": "aten.mul", "inputs": ["x", "x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "b", "op": "aten.mul", "inputs": ["x", "x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "va", "op": "aten.view", "inputs": ["a"], "attrs": {"size": [8]}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "write", "op": "aten.add_.Scalar", "inputs": ["va"], "attrs": {"other": 1}, "outputs": [{"dtype": "f32", "shape": [8]}]}],
  "outputs": ["b"]})";

constexpr const char* kDataDependent = R"({
  "inputs": [{"name": "x", "type": {"dtype": "f32", "shape": ["n"]}},
             {"name": "y", "type": {"dtype": "f32", "shape": ["n"]}}],
  "nodes": [
    {"name": "a", "op": "aten.nonzero", "inputs": ["x"], "outputs": [{"dtype": "i64", "shape": ["u1", 1]}]},
    {"name": "b", "op": "aten.nonzero", "inputs": ["y"], "outputs": [{"dtype": "i64", "shape": ["u0", 1]}]},
    {"name": "cat", "op": "aten.cat", "inputs": ["a", "b"], "outputs": [{"dtype": "i64", "shape": ["u2", 1]}]}],
  "outputs": ["cat"]})";

std::vector<Case> guard_cases() {
  return {
      // --- literals are exact ---
      {"guard_decimal_leading_zero", kDiffer, set_guards({"s0 * 0.5 < 100"}),
       set_guards({"s0 * 0.05 < 100"})},
      {"guard_decimal_digits", kDiffer, set_guards({"s0 * 0.0501 < 100"}),
       set_guards({"s0 * 0.05 < 100"})},
      {"guard_float_vs_integer", kDiffer, set_guards({"s0 / 2.0 < 100"}),
       set_guards({"s0 / 2 < 100"})},
      {"guard_exponent_vs_integer", kDiffer, set_guards({"s0 < 1000"}), set_guards({"s0 < 1e3"})},
      {"guard_float_spellings", kMatch, set_guards({"s0 * 5e-2 < 100"}),
       set_guards({"s0 * 0.050 < 100"})},
      {"guard_exponent_spelling", kMatch, set_guards({"s0 < 1000.0"}), set_guards({"s0 < 1e3"})},
      {"guard_hex_literal", kMatch, [](Request& r) { r.guards[0] = "s0 % 0x10 == 0"; }},
      {"guard_hex_value", kDiffer, [](Request& r) { r.guards[0] = "s0 % 0x11 == 0"; }},
      {"guard_big_integer", kDiffer, set_guards({"s0 < 123456789012345678901234567891"}),
       set_guards({"s0 < 123456789012345678901234567890"})},
      // --- tensor names follow the graph's input positions ---
      {"guard_stride_other_input", kDiffer, [](Request& r) { r.guards[2] = "w.stride(1) == 1"; }},
      {"guard_size_other_input", kDiffer, set_guards({"w.size(0) == 768"}),
       set_guards({"x.size(0) == 768"})},
      {"guard_over_swapped_inputs", kDiffer,
       [](Request& r) {
         replace(*r.graph_json, R"("name": "x")", R"("name": "TMP")");
         replace(*r.graph_json, R"("name": "y")", R"("name": "x")");
         replace(*r.graph_json, R"("name": "TMP")", R"("name": "y")");
         replace(*r.graph_json, R"(["x", "y"])", R"(["y", "x"])");
       },
       use_graph(kTwoInputs, {"x.stride(0) == 64"})},
      {"guard_inputs_renamed_consistently", kMatch,
       [](Request& r) {
         replace(*r.graph_json, R"("name": "x")", R"("name": "lhs")");
         replace(*r.graph_json, R"(["x", "y"])", R"(["lhs", "y"])");
         r.guards = {"lhs.stride(0) == 64"};
       },
       use_graph(kTwoInputs, {"x.stride(0) == 64"})},
      {"guard_subscript_index", kDiffer, set_guards({"x.size()[1] == 768"}),
       set_guards({"x.size()[0] == 768"})},
      // --- names a graph does not have are refused ---
      {"guard_unknown_name", kRefuse, [](Request& r) { r.guards.push_back("batchh % 16 == 0"); }},
      {"guard_intermediate_node_name", kRefuse,
       [](Request& r) { r.guards.push_back("mm.stride(0) == 768"); }},
      {"guard_only_symbol_spelling_canonical", kRefuse,
       [](Request& r) { r.guards = {"s0 % 16 == 0"}; },
       [](Request& r) {
         r.block.batch_symbol = "batch";
         r.guards = {"batch % 16 == 0"};
       }},
      {"guard_ambiguous_not", kRefuse, [](Request& r) { r.guards.push_back("!s0 == 3"); }},
      {"guard_unsupported_operator", kRefuse, [](Request& r) { r.guards.push_back("s0 & 1"); }},
      {"guard_trailing_garbage", kRefuse, [](Request& r) { r.guards.push_back("s0 == 2 3"); }},
      // --- without a graph, names are kept verbatim ---
      {"guard_no_graph_symbol_name", kDiffer, no_graph({"u1 > 2"}), no_graph({"u0 > 2"})},
      {"guard_no_graph_tensor_name", kDiffer, no_graph({"y.stride(1) == 1"}),
       no_graph({"x.stride(1) == 1"})},
      {"guard_no_graph_string_subscript", kDiffer, no_graph({"L['y'].size()[0] == 4"}),
       no_graph({"L['x'].size()[0] == 4"})},
      // --- structure and precedence ---
      {"guard_gt_across_and", kDiffer, set_guards({"2 and True < s0"}),
       set_guards({"s0 > 2 and True"})},
      {"guard_gt_across_and_c_spelling", kMatch, set_guards({"True and 2 < s0"}),
       set_guards({"s0 > 2 && True"})},
      {"guard_and_operands_sorted", kMatch, set_guards({"s0 % 2 == 0 && 16 < s0"}),
       set_guards({"s0 > 16 and s0 % 2 == 0"})},
      {"guard_conjunction_split", kMatch,
       set_guards({"s0 % 16 == 0 and 2 <= s0 <= 4096", "x.stride(1) == 1"})},
      {"guard_and_vs_or", kDiffer, set_guards({"s0 == 1 or s0 == 2"}),
       set_guards({"s0 == 1 and s0 == 2"})},
      {"guard_or_grouping", kDiffer, set_guards({"(s0 == 1 or s0 == 2) and s0 < 9"}),
       set_guards({"s0 == 1 or s0 == 2 and s0 < 9"})},
      {"guard_not", kDiffer, set_guards({"s0 == 3"}), set_guards({"not s0 == 3"})},
      {"guard_not_spellings", kMatch, set_guards({"!(s0 == 3)"}), set_guards({"not s0 == 3"})},
      {"guard_mul_add_precedence", kDiffer, set_guards({"s0 * (2 + 1) == 9"}),
       set_guards({"s0 * 2 + 1 == 9"})},
      {"guard_redundant_parentheses", kMatch, set_guards({"((s0 * 2)) + (1) == 9"}),
       set_guards({"s0 * 2 + 1 == 9"})},
      {"guard_power_associativity", kDiffer, set_guards({"(2 ** 3) ** s0 < 9"}),
       set_guards({"2 ** 3 ** s0 < 9"})},
      {"guard_unary_minus_power", kDiffer, set_guards({"(-s0) ** 2 < 9"}),
       set_guards({"-s0 ** 2 < 9"})},
      {"guard_subtraction_order", kDiffer, set_guards({"1 - s0 < 0"}), set_guards({"s0 - 1 < 0"})},
      {"guard_addition_commutes", kMatch, set_guards({"1 + s0 < 9"}), set_guards({"s0 + 1 < 9"})},
      {"guard_floor_division", kDiffer, set_guards({"s0 / 2 < 9"}), set_guards({"s0 // 2 < 9"})},
      {"guard_call_argument_order", kDiffer, set_guards({"Eq(Mod(16, s0), 0)"}),
       set_guards({"Eq(Mod(s0, 16), 0)"})},
      {"guard_call_argument", kDiffer, set_guards({"Eq(Mod(s0, 8), 0)"}),
       set_guards({"Eq(Mod(s0, 16), 0)"})},
      // --- comparisons ---
      {"guard_chain_downwards", kMatch, [](Request& r) { r.guards[1] = "4096 >= s0 >= 2"; }},
      {"guard_chain_strictness", kDiffer, [](Request& r) { r.guards[1] = "2 < s0 <= 4096"; }},
      {"guard_chain_downwards_strictness", kDiffer,
       [](Request& r) { r.guards[1] = "4096 > s0 >= 2"; }},
      {"guard_chain_is_not_nested", kDiffer, [](Request& r) { r.guards[1] = "(2 <= s0) <= 4096"; }},
      {"guard_gt_flipped", kMatch, set_guards({"2 < s0"}), set_guards({"s0 > 2"})},
      {"guard_gt_vs_ge", kDiffer, set_guards({"s0 >= 2"}), set_guards({"s0 > 2"})},
      {"guard_not_equal_flipped", kMatch, set_guards({"7 != s0"}), set_guards({"s0 != 7"})},
      // --- `and` / `or` return an operand; short-circuits; C spellings ---
      {"guard_or_value_operands_swapped", kDiffer, set_guards({"-2 <= (2 or s0)"}),
       set_guards({"-2 <= (s0 or 2)"})},
      {"guard_or_operand_that_may_raise_moved", kDiffer, set_guards({"s0 % s0 == 0 or 3"}),
       set_guards({"3 or s0 % s0 == 0"})},
      {"guard_or_truth_operands_swapped", kMatch, set_guards({"s0 < 8 or s0 % 2 == 0"}),
       set_guards({"s0 % 2 == 0 or s0 < 8"})},
      {"guard_not_before_modulo", kRefuse, [](Request& r) { r.guards.push_back("!s0 % 2"); }},
      {"guard_no_graph_sum_order", kDiffer, no_graph({"(q + p)[0] == 1"}),
       no_graph({"(p + q)[0] == 1"})},
  };
}

std::vector<Case> graph_cases() {
  return {
      // --- integers the key cannot hold are refused, floats stay exact ---
      {"dim_beyond_uint64", kRefuse,
       edit_graph(R"(["b", "n"]}})", R"([99999999999999999999, "n"]}})"), use_graph(kOneOp)},
      {"stride_uint64_max", kRefuse,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": [18446744073709551615, 1]}})"),
       use_graph(kOneOp)},
      {"stride_int64_max_plus_one", kRefuse,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": [9223372036854775808, 1]}})"),
       use_graph(kOneOp)},
      {"attr_beyond_int64", kRefuse,
       edit_graph(R"("slope": 0.1)", R"("slope": -9223372036854775809)"), use_graph(kOneOp)},
      {"attr_float_last_digit", kDiffer,
       edit_graph(R"("slope": 0.1)", R"("slope": 0.1000000000000001)"), use_graph(kOneOp)},
      {"attr_float_vs_integer", kDiffer, edit_graph(R"("slope": 0.1)", R"("slope": 1)"),
       use_graph(kOneOp)},
      {"attr_float_same_double", kMatch,
       edit_graph(R"("slope": 0.1)", R"("slope": 0.10000000000000001)"), use_graph(kOneOp)},
      // --- symbolic row-major strides ---
      {"symbolic_row_major_strides", kMatch,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": ["n", 1]}})"), use_graph(kOneOp)},
      {"symbolic_transposed_strides", kDiffer,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": [1, "b"]}})"), use_graph(kOneOp)},
      {"symbolic_wrong_strides", kDiffer,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": ["b", 1]}})"), use_graph(kOneOp)},
      {"symbolic_padded_strides", kDiffer,
       edit_graph(R"(["b", "n"]}})", R"(["b", "n"], "strides": ["n", 2]}})"), use_graph(kOneOp)},
      // --- effects: never merged, ordered ---
      {"two_randoms_vs_one", kDiffer, edit_graph(R"(["r1", "r2"])", R"(["r1", "r1"])"),
       use_graph(kTwoRandoms)},
      {"randoms_renamed", kMatch,
       [](Request& r) {
         replace(*r.graph_json, R"("name": "r1")", R"("name": "noise")");
         replace(*r.graph_json, R"(["r1", "r2"])", R"(["noise", "r2"])");
       },
       use_graph(kTwoRandoms)},
      {"random_kinds_swapped_in_program_order", kDiffer,
       [](Request& r) {
         replace(*r.graph_json, R"("name": "r1", "op": "aten.rand_like")",
                 R"("name": "r1", "op": "TMP")");
         replace(*r.graph_json, R"("name": "r2", "op": "aten.randn_like")",
                 R"("name": "r2", "op": "aten.rand_like")");
         replace(*r.graph_json, R"("op": "TMP")", R"("op": "aten.randn_like")");
         replace(*r.graph_json, R"(["r1", "r2"])", R"(["r2", "r1"])");
       },
       [](Request& r) {
         use_graph(kTwoRandoms)(r);
         replace(*r.graph_json, R"("name": "r2", "op": "aten.rand_like")",
                 R"("name": "r2", "op": "aten.randn_like")");
       }},
      {"pure_nodes_reordered_between_effects", kMatch,
       [](Request& r) {
         const std::string relu = R"("name": "p1", "op": "aten.relu")";
         const std::string neg = R"("name": "p2", "op": "aten.neg")";
         replace(*r.graph_json, relu, "TMP");
         replace(*r.graph_json, neg, relu);
         replace(*r.graph_json, "TMP", neg);
       },
       use_graph(kTwoRandoms)},
      {"effectful_flag_two_vs_one", kDiffer, edit_graph(R"(["e1", "e2"])", R"(["e1", "e1"])"),
       use_graph(kTwoEffects)},
      {"effectful_flag_dropped", kDiffer,
       [](Request& r) {
         for (int i = 0; i < 2; ++i) {
           replace(*r.graph_json,
                   R"("name": "e)" + std::to_string(i + 1) +
                       R"(", "op": "mylib.sample", "inputs": ["x"], "effectful": true)",
                   R"("name": "e)" + std::to_string(i + 1) +
                       R"(", "op": "mylib.sample", "inputs": ["x"])");
         }
       },
       use_graph(kTwoEffects)},
      {"in_place_order_swapped", kDiffer,
       [](Request& r) {
         replace(*r.graph_json, R"("aten.add_.Scalar", "inputs": ["x"], "attrs": {"other": 1})",
                 R"("aten.TMP", "inputs": ["x"], "attrs": {"other": 2})");
         replace(*r.graph_json, R"("aten.mul_.Scalar", "inputs": ["x"], "attrs": {"other": 2})",
                 R"("aten.add_.Scalar", "inputs": ["x"], "attrs": {"other": 1})");
         replace(*r.graph_json, R"("aten.TMP")", R"("aten.mul_.Scalar")");
       },
       use_graph(kInPlace)},
      {"read_moved_after_in_place", kDiffer,
       [](Request& r) {
         replace(
             *r.graph_json,
             R"({"name": "read", "op": "aten.relu", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": [8]}]},
)",
             "");
         replace(*r.graph_json,
                 R"("attrs": {"other": 2}, "outputs": [{"dtype": "f32", "shape": [8]}]})",
                 R"("attrs": {"other": 2}, "outputs": [{"dtype": "f32", "shape": [8]}]},
    {"name": "read", "op": "aten.relu", "inputs": ["x"], "outputs": [{"dtype": "f32", "shape": [8]}]})");
       },
       use_graph(kInPlace)},
      {"written_look_alike_output", kDiffer, edit_graph(R"(["b", "read"])", R"(["a", "read"])"),
       use_graph(kWrittenLookAlike)},
      {"written_look_alike_read", kDiffer,
       edit_graph(R"("aten.neg", "inputs": ["b"])", R"("aten.neg", "inputs": ["a"])"),
       use_graph(kWrittenLookAlike)},
      {"look_alike_written_through_view_output", kDiffer,
       edit_graph(R"("outputs": ["b"])", R"("outputs": ["a"])"), use_graph(kWrittenThroughView)},
      {"look_alikes_swapped_with_their_writer", kMatch,
       [](Request& r) {
         replace(*r.graph_json, R"("aten.add_.Scalar", "inputs": ["a"])",
                 R"("aten.add_.Scalar", "inputs": ["b"])");
         replace(*r.graph_json, R"("aten.neg", "inputs": ["b"])", R"("aten.neg", "inputs": ["a"])");
         replace(*r.graph_json, R"(["b", "read"])", R"(["a", "read"])");
       },
       use_graph(kWrittenLookAlike)},
      {"random_reads_later_random", kRefuse,
       edit_graph(R"({"name": "r1", "op": "aten.rand_like", "inputs": ["x"])",
                  R"({"name": "r1", "op": "aten.rand_like", "inputs": ["r2"])"),
       use_graph(kTwoRandoms)},
      {"sdpa_two_vs_one", kDiffer, edit_graph(R"(["e1", "e2"])", R"(["e1", "e1"])"),
       [](Request& r) {
         use_graph(kTwoEffects)(r);
         for (const char* e : {"e1", "e2"}) {
           replace(
               *r.graph_json,
               std::string(R"("name": ")") + e +
                   R"(", "op": "mylib.sample", "inputs": ["x"], "effectful": true)",
               std::string(R"("name": ")") + e +
                   R"(", "op": "aten._scaled_dot_product_efficient_attention", "inputs": ["x"])");
         }
       }},
      // --- strings naming symbols follow the symbol ---
      {"attr_naming_symbol_over_swapped_dims", kDiffer,
       [](Request& r) {
         replace(*r.graph_json, R"(["b", "n"]}})", R"(["n", "b"]}})");
         replace(*r.graph_json, R"(["b", "n"]}])", R"(["n", "b"]}])");
       },
       [](Request& r) {
         use_graph(kOneOp)(r);
         replace(*r.graph_json, R"("slope": 0.1)", R"("slope": 0.1, "dim": "n")");
       }},
      {"two_all_reduces_vs_one", kDiffer, edit_graph(R"(["a1", "a2"])", R"(["a1", "a1"])"),
       use_graph(kCollectives)},
      // --- data-dependent symbols by first use ---
      {"data_dependent_symbols_renamed", kMatch,
       [](Request& r) {
         replace(*r.graph_json, R"(["u1", 1])", R"(["TMP", 1])");
         replace(*r.graph_json, R"(["u0", 1])", R"(["u1", 1])");
         replace(*r.graph_json, R"(["TMP", 1])", R"(["u0", 1])");
         r.guards = {"u0 >= 1", "u1 <= n"};
       },
       use_graph(kDataDependent, {"u1 >= 1", "u0 <= n"})},
      {"data_dependent_nodes_listed_in_other_order", kMatch,
       [](Request& r) {
         const std::string a =
             R"({"name": "a", "op": "aten.nonzero", "inputs": ["x"], "outputs": [{"dtype": "i64", "shape": ["u1", 1]}]},)";
         replace(*r.graph_json, a, "");
         replace(*r.graph_json, R"({"name": "cat")", a + R"(
    {"name": "cat")");
       },
       use_graph(kDataDependent, {"u1 >= 1"})},
      {"data_dependent_symbol_shared", kDiffer, edit_graph(R"(["u0", 1])", R"(["u1", 1])"),
       use_graph(kDataDependent)},
      {"guard_on_other_data_dependent_symbol", kDiffer, set_guards({"u0 >= 1"}),
       use_graph(kDataDependent, {"u1 >= 1"})},
  };
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> out = block_cases();
    for (auto&& more : {guard_cases(), graph_cases()}) {
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }();
  return all;
}

class KeySensitivity : public ::testing::TestWithParam<std::size_t> {};

TEST_P(KeySensitivity, KeyChangesExactlyWhenSemanticsDo) {
  const Case& c = cases()[GetParam()];
  Request base;
  if (c.setup) {
    c.setup(base);
  }
  Request edited = base;
  c.edit(edited);
  const auto a = manifest_of(base);
  ASSERT_TRUE(a.has_value()) << c.name << ": base request refused: " << a.error();
  const auto b = manifest_of(edited);
  if (c.expect == kRefuse) {
    EXPECT_FALSE(b.has_value()) << c.name
                                << ": accepted what the key cannot represent: " << b->key() << "\n"
                                << to_text(explain(*a, *b));
    return;
  }
  ASSERT_TRUE(b.has_value()) << c.name << ": edited request refused: " << b.error();
  ASSERT_TRUE(is_valid_key(a->key()));
  ASSERT_TRUE(is_valid_key(b->key()));
  if (c.expect == kDiffer) {
    EXPECT_NE(a->key(), b->key()) << c.name << ": a semantic change kept the key (false hit)\n"
                                  << to_text(explain(*a, *b));
  } else {
    EXPECT_EQ(a->key(), b->key()) << c.name
                                  << ": an equivalent spelling changed the key (needless miss)\n"
                                  << to_text(explain(*a, *b));
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, KeySensitivity, ::testing::Range<std::size_t>(0, cases().size()),
                         [](const auto& p) { return std::string(cases()[p.param].name); });

TEST(KeySensitivity, MatrixIsLargeEnough) {
  EXPECT_GE(cases().size(), 30U);
  EXPECT_GE(guard_cases().size() + graph_cases().size(), 45U);
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
