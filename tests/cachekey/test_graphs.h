#pragma once
// A small attention-like block used by the cachekey tests, built with options
// so each test can change exactly one thing.

#include <kcache/cachekey/graph.h>

#include <string>

namespace kcache::cachekey::testing {

struct BlockSpec {
  std::string dtype = "bf16";
  std::string batch_symbol = "s0";
  std::int64_t hidden = 768;
  std::string activation = "gelu";
  std::string gelu_approximate = "tanh";
  double eps = 1e-5;
  bool swap_add_order = false;   // adds the two independent branches in the other order
  bool swap_mm_operands = false; // mm(w, x) instead of mm(x, w)
  bool rename_nodes = false;     // different node names, same graph
  bool add_dead_node = false;    // an extra node nobody consumes
  bool transposed_weight_layout = false;
  std::string name_prefix; // for twelve identical blocks
};

inline TensorType tensor(const std::string& dtype, std::vector<Dim> shape,
                         std::vector<Dim> strides = {}) {
  return TensorType{dtype, std::move(shape), std::move(strides)};
}

inline Graph make_block(const BlockSpec& s = {}) {
  Graph g;
  const std::string p = s.name_prefix + (s.rename_nodes ? "renamed_" : "");
  const Dim batch = Dim::symbol(s.batch_symbol);
  const Dim hidden = Dim::fixed(s.hidden);
  const auto x = g.add_input(p + "x", tensor(s.dtype, {batch, hidden}));
  const auto w =
      g.add_input(p + "w", s.transposed_weight_layout
                               ? tensor(s.dtype, {hidden, hidden}, {Dim::fixed(1), hidden})
                               : tensor(s.dtype, {hidden, hidden}));
  const TensorType act = tensor(s.dtype, {batch, hidden});

  const auto mm = *g.add_node(p + "mm", "aten.mm",
                              s.swap_mm_operands ? std::vector<ValueRef>{{w, 0}, {x, 0}}
                                                 : std::vector<ValueRef>{{x, 0}, {w, 0}},
                              {act});
  // Two independent branches; their creation order must not matter.
  auto make_norm = [&] {
    return *g.add_node(p + "norm", "aten.layer_norm", {{x, 0}}, {act},
                       {{"eps", s.eps}, {"normalized_shape", AttrValue::List{s.hidden}}});
  };
  auto make_act = [&] {
    Attrs attrs;
    if (s.activation == "gelu") {
      attrs.emplace("approximate", s.gelu_approximate);
    }
    return *g.add_node(p + "act", "aten." + s.activation, {{mm, 0}}, {act}, std::move(attrs));
  };
  NodeId norm = 0, activation = 0;
  if (s.swap_add_order) {
    activation = make_act();
    norm = make_norm();
  } else {
    norm = make_norm();
    activation = make_act();
  }
  if (s.add_dead_node) {
    (void)*g.add_node(p + "dead", "aten.neg", {{x, 0}}, {act});
  }
  const auto out = *g.add_node(p + "add", "aten.add", {{norm, 0}, {activation, 0}}, {act});
  (void)g.add_output({out, 0});
  return g;
}

} // namespace kcache::cachekey::testing
