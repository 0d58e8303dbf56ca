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
