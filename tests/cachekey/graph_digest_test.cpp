// Graph digest rules beyond the sensitivity matrix: which ops count as
// effectful, how effects keep nodes apart, strides and symbol numbering.

#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

using testing::tensor;

TEST(EffectfulOps, KnownOps) {
  for (const char* op : {"aten.rand",
                         "aten.rand_like",
                         "aten.randn.default",
                         "aten.randint.low",
                         "aten.randperm",
                         "aten.random_",
                         "aten.bernoulli.p",
                         "torch.ops.aten.bernoulli_.float",
                         "aten.dropout",
                         "aten.native_dropout",
                         "aten._fused_dropout",
                         "aten.feature_alpha_dropout",
                         "aten.normal.Tensor_Tensor",
                         "aten.uniform_",
                         "aten.multinomial",
                         "aten.exponential_",
                         "aten.rrelu_with_noise",
                         "prims.inductor_random",
                         "prims.inductor_seeds",
                         "aten.empty.memory_format",
                         "aten.empty_like",
                         "aten.empty_strided",
                         "aten.new_empty",
                         "aten.add_.Tensor",
                         "aten.copy_",
                         "aten.index_put_",
                         "aten.__iadd__",
                         "aten.add.out",
                         "c10d.allreduce_",
                         "_c10d_functional.all_reduce",
                         "_c10d_functional.wait_tensor",
                         "c10d_functional.all_gather_into_tensor",
                         "aten._assert_async.msg",
                         "aten.print",
                         "higher_order.with_effects",
                         "higher_order.run_and_save_rng_state",
                         "rand_like",
                         "mylib.broadcast"}) {
    EXPECT_TRUE(is_effectful_op(op)) << op;
  }
}

TEST(EffectfulOps, OutOverloadsInPlaceSpellingsAndHiddenState) {
  for (const char* op :
       {// out= overloads of any name
        "aten.sum.IntList_out", "aten.add.Scalar_out", "aten.max.dim_max", "aten.min.dim_min",
        "aten.sort.values", "aten.topk.values", "aten.median.dim_values",
        "aten.nll_loss_forward.output", "aten.nll_loss_backward.grad_input",
        "aten.linalg_eigh.eigvals", "aten._native_batch_norm_legit.no_stats_out",
        "torch.ops.aten.sum.out",
        // in place, with :: as well as .
        "aten::add_.Tensor", "aten::add_", "add_.Tensor", "aten::copy_",
        // random: attention dropout, RNNs
        "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_flash_attention",
        "aten._scaled_dot_product_cudnn_attention", "aten._flash_attention_forward",
        "aten._efficient_attention_forward", "aten.scaled_dot_product_attention",
        "aten.native_dropout", "aten.lstm.input", "aten._cudnn_rnn",
        // running statistics updated in place
        "aten.native_batch_norm", "aten._native_batch_norm_legit", "aten.batch_norm",
        "aten.cudnn_batch_norm", "aten.instance_norm", "aten._fused_moving_avg_obs_fq_helper",
        // writes into an argument, wrappers of kernels and subgraphs
        "prims.copy_to", "prims.resize", "higher_order.triton_kernel_wrapper_mutation",
        "higher_order.auto_functionalized", "higher_order.cond",
        "torch.ops.higher_order.invoke_subgraph",
        // other effects
        "aten._functional_assert_async.msg", "aten.sym_constrain_range", "aten._make_dep_token",
        "aten._print"}) {
    EXPECT_TRUE(is_effectful_op(op)) << op;
  }
  // Misses by design (broad rules): pure ops caught by a prefix or a part.
  for (const char* op : {"aten.normalize", "aten.to.dtype_layout", "aten.__invert__"}) {
    EXPECT_TRUE(is_effectful_op(op)) << op;
  }
}

TEST(EffectfulOps, PureOps) {
  for (const char* op :
       {"aten.add.Tensor", "aten.mm", "aten.layer_norm", "aten.native_layer_norm", "aten.gelu",
        "aten.broadcast_to", "aten.broadcast_tensors", "aten.__and__.Tensor", "aten.copy",
        "aten.clone", "aten.view", "aten.nonzero", "aten.softmax", "neg", "f", "input"}) {
    EXPECT_FALSE(is_effectful_op(op)) << op;
  }
}

TEST(EffectfulNodes, NeverMergedByContent) {
  auto build = [](bool distinct, bool flag) {
    Graph g;
    const auto x = g.add_input("x", tensor("f32", {Dim::fixed(4)}));
    const auto a = *g.add_node("a", "mylib.sample", {{x, 0}}, {tensor("f32", {Dim::fixed(4)})});
    const auto b = *g.add_node("b", "mylib.sample", {{x, 0}}, {tensor("f32", {Dim::fixed(4)})});
    if (flag) {
      EXPECT_TRUE(g.mark_effectful(a).has_value());
      EXPECT_TRUE(g.mark_effectful(b).has_value());
    }
    const auto sum = *g.add_node("sum", "aten.add", {{a, 0}, {distinct ? b : a, 0}},
                                 {tensor("f32", {Dim::fixed(4)})});
    (void)g.add_output({sum, 0});
    return digest_graph(g);
  };
  // Pure look-alikes are interchangeable, effectful ones are not.
  EXPECT_EQ(build(true, false).root, build(false, false).root);
  EXPECT_NE(build(true, true).root, build(false, true).root);
  const GraphDigest d = build(true, true);
  EXPECT_NE(d.node_digests[1], d.node_digests[2]);
}

TEST(Attributes, StringsNamingSymbolsFollowTheSymbol) {
  // x:[batch], y:[seq] and x:[seq], y:[batch] rename to the same s0, s1; an
  // attribute "seq" names s1 in one and s0 in the other.
  auto build = [](const char* x_dim, const char* y_dim, AttrValue size) {
    Graph g;
    const auto x = g.add_input("x", tensor("f32", {Dim::symbol(x_dim)}));
    const auto y = g.add_input("y", tensor("f32", {Dim::symbol(y_dim)}));
    const auto v = *g.add_node("v", "aten.new_zeros", {{x, 0}}, {tensor("f32", {Dim::fixed(4)})},
                               {{"size", std::move(size)}});
    (void)g.add_output({v, 0});
    (void)g.add_output({y, 0});
    return digest_graph(g).root;
  };
  const AttrValue seq(AttrValue::List{AttrValue(std::string("seq"))});
  EXPECT_NE(build("batch", "seq", seq), build("seq", "batch", seq));
  EXPECT_NE(build("batch", "seq", AttrValue(std::string("seq*2"))),
            build("seq", "batch", AttrValue(std::string("seq*2"))));
  EXPECT_EQ(build("batch", "seq", seq), build("batch", "seq", seq));
  // Strings are never renamed: "mean" over a dim called mean is not "sum" over
  // a dim called sum, though both dims are s0.
  EXPECT_NE(build("mean", "n", AttrValue(std::string("mean"))),
            build("sum", "n", AttrValue(std::string("sum"))));
  // Nor is a string that merely spells a canonical name the symbol it renames to.
  EXPECT_NE(build("batch", "n", AttrValue(std::string("s0"))),
            build("batch", "n", AttrValue(std::string("batch"))));
  // Strings that name no symbol hash as before.
  EXPECT_EQ(build("batch", "seq", AttrValue(std::string("tanh"))),
            build("b", "s", AttrValue(std::string("tanh"))));
}

TEST(EffectfulNodes, MarkingChecksTheNode) {
  Graph g;
  const auto x = g.add_input("x", tensor("f32", {Dim::fixed(4)}));
  EXPECT_FALSE(g.mark_effectful(x).has_value());
  EXPECT_FALSE(g.mark_effectful(7).has_value());
}

TEST(EffectfulNodes, PureGraphsIgnoreInsertionOrder) {
  // The block's independent branches, added in either order, still hash alike.
  testing::BlockSpec swapped;
  swapped.swap_add_order = true;
  EXPECT_EQ(digest_graph(testing::make_block()).root,
            digest_graph(testing::make_block(swapped)).root);
}

TEST(Strides, RowMajorOverSymbolsIsDefault) {
  auto digest = [](std::vector<Dim> shape, std::vector<Dim> strides) {
    Graph g;
    g.add_input("x", tensor("f32", std::move(shape), std::move(strides)));
    return digest_graph(g).root;
  };
  const Dim b = Dim::symbol("b"), n = Dim::symbol("n");
  EXPECT_EQ(digest({b, n}, {}), digest({b, n}, {n, Dim::fixed(1)}));
  EXPECT_EQ(digest({b, Dim::fixed(12), Dim::fixed(64)}, {}),
            digest({b, Dim::fixed(12), Dim::fixed(64)},
                   {Dim::fixed(768), Dim::fixed(64), Dim::fixed(1)}));
  EXPECT_EQ(digest({b, n, Dim::fixed(1)}, {}),
            digest({b, n, Dim::fixed(1)}, {n, Dim::fixed(1), Dim::fixed(1)}));
  EXPECT_NE(digest({b, n}, {}), digest({b, n}, {Dim::fixed(1), b}));
  EXPECT_NE(digest({b, n}, {}), digest({b, n}, {b, Dim::fixed(1)}));
  // b*n*4 cannot be written as one Dim: the strides are kept (a miss, never a hit).
  EXPECT_NE(digest({b, n, Dim::fixed(4)}, {}),
            digest({b, n, Dim::fixed(4)}, {Dim::symbol("n4"), Dim::fixed(4), Dim::fixed(1)}));
  // The stride of a size-1 dim is kept as written.
  EXPECT_NE(digest({Dim::fixed(1), Dim::fixed(8)}, {}),
            digest({Dim::fixed(1), Dim::fixed(8)}, {Dim::fixed(1), Dim::fixed(1)}));
}

TEST(Symbols, DataDependentByFirstUse) {
  auto build = [](const char* first, const char* second, bool swap_insertion) {
    Graph g;
    const auto x = g.add_input("x", tensor("f32", {Dim::symbol("n")}));
    auto nz = [&](const char* name, const char* symbol) {
      return *g.add_node(name, "aten.nonzero", {{x, 0}},
                         {tensor("i64", {Dim::symbol(symbol), Dim::fixed(1)})});
    };
    NodeId a = 0, b = 0;
    if (swap_insertion) {
      b = nz("b", second);
      a = nz("a", first);
    } else {
      a = nz("a", first);
      b = nz("b", second);
    }
    const auto cat = *g.add_node("cat", "aten.cat", {{a, 0}, {b, 0}},
                                 {tensor("i64", {Dim::symbol("total"), Dim::fixed(1)})});
    (void)g.add_output({cat, 0});
    return digest_graph(g);
  };
  const GraphDigest d = build("zz", "aa", false);
  EXPECT_EQ(d.symbols.at("n"), "s0");
  EXPECT_EQ(d.symbols.at("zz"), "s1"); // first use, not alphabetical
  EXPECT_EQ(d.symbols.at("aa"), "s2");
  EXPECT_EQ(d.symbols.at("total"), "s3");
  EXPECT_EQ(d.root, build("u0", "u1", false).root);
  EXPECT_EQ(d.root, build("u1", "u0", true).root);
  EXPECT_NE(d.root, build("u0", "u0", false).root);
}

} // namespace
} // namespace kcache::cachekey
