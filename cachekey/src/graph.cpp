#include <kcache/cachekey/graph.h>

#include <algorithm>
#include <array>

namespace kcache::cachekey {
namespace {

// Namespaces whose every op counts: collectives, and higher-order ops, which
// wrap subgraphs or kernels that may mutate, sample or synchronize.
constexpr auto kEffectfulNamespaces = std::to_array<std::string_view>(
    {"c10d", "_c10d_functional", "c10d_functional", "_dtensor", "c10d_ops", "higher_order"});
// Matched as a prefix of the op name, after a leading "native_" or "_fused_".
constexpr auto kEffectfulPrefixes = std::to_array<std::string_view>({"rand",
                                                                     "bernoulli",
                                                                     "dropout",
                                                                     "feature_dropout",
                                                                     "alpha_dropout",
                                                                     "feature_alpha_dropout",
                                                                     "normal",
                                                                     "uniform",
                                                                     "multinomial",
                                                                     "exponential",
                                                                     "geometric",
                                                                     "cauchy",
                                                                     "log_normal",
                                                                     "poisson",
                                                                     "binomial",
                                                                     "rrelu",
                                                                     "_standard_gamma",
                                                                     "_sample_dirichlet",
                                                                     "empty",
                                                                     "new_empty",
                                                                     "barrier",
                                                                     "send",
                                                                     "recv",
                                                                     "resize"});
// Matched anywhere in the op name.
constexpr auto kEffectfulParts = std::to_array<std::string_view>(
    {"random", "philox", "seed", "rng", "with_effects", "record_stream", "_local_scalar_dense",
     "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "wait_tensor", "isend", "irecv",
     // attention kernels that draw dropout masks from the generator
     "scaled_dot_product", "flash_attention", "efficient_attention", "cudnn_attention",
     // batch / instance norm update running statistics in place; RNNs draw dropout
     "batch_norm", "instance_norm", "moving_avg", "rnn", "lstm", "gru",
     // writes into an argument; asserts (constrain_range too), prints, effect tokens
     "copy_to", "mutation", "auto_functionalized", "assert", "constrain_range", "print", "token"});
// Overload names of out= variants that do not contain "out".
constexpr auto kOutOverloads = std::to_array<std::string_view>({"values",
                                                                "values_stable",
                                                                "dim_values",
                                                                "names_dim_values",
                                                                "dimname_values",
                                                                "dimname_values_stable",
                                                                "dim_max",
                                                                "dim_min",
                                                                "names_dim_max",
                                                                "names_dim_min",
                                                                "grad_input",
                                                                "eigvals",
                                                                "eigenvalues",
                                                                "inverse",
                                                                "result",
                                                                "sign",
                                                                "solution",
                                                                "U",
                                                                "Q",
                                                                "X",
                                                                "L"});

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// "torch.ops.aten.add_.Tensor" and "aten::add_.Tensor" alike.
std::vector<std::string_view> split_op(std::string_view op) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto dot = op.find('.', start);
    const auto colons = op.find("::", start);
    const auto end = std::min(dot, colons);
    parts.push_back(op.substr(start, end == std::string_view::npos ? op.npos : end - start));
    if (end == std::string_view::npos) {
      return parts;
    }
    start = end + (end == colons ? 2 : 1);
  }
}

bool in_place(std::string_view name) {
  if (name.size() > 4 && name.starts_with("__i") && name.ends_with("__")) {
    return true; // __iadd__ (and, needlessly, __invert__, __index__)
  }
  return name.size() > 1 && name.ends_with('_') && !name.ends_with("__");
}

bool effectful_name(std::string_view name) {
  if (in_place(name)) {
    return true;
  }
  const auto has = [&](std::string_view part) { return name.find(part) != name.npos; };
  if (std::any_of(kEffectfulParts.begin(), kEffectfulParts.end(), has)) {
    return true;
  }
  for (std::string_view prefix : {"native_", "_fused_"}) {
    if (name.starts_with(prefix)) {
      name.remove_prefix(prefix.size());
    }
  }
  // "broadcast" alone is the collective; broadcast_to and friends are pure.
  return name == "broadcast" || name == "_broadcast_coalesced" ||
         std::any_of(kEffectfulPrefixes.begin(), kEffectfulPrefixes.end(),
                     [&](std::string_view p) { return name.starts_with(p); });
}

} // namespace

bool is_effectful_op(std::string_view op) {
  std::vector<std::string_view> parts = split_op(op);
  if (parts.size() > 2 && parts[0] == "torch" && parts[1] == "ops") {
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  if (parts.size() == 1) {
    return effectful_name(parts[0]);
  }
  // namespace.name[.overload...]; "add_.Tensor" without a namespace reads the
  // same way, so the first part is checked as a name as well.
  if (contains(kEffectfulNamespaces, parts[0]) || effectful_name(parts[0]) ||
      effectful_name(parts[1])) {
    return true;
  }
  return std::any_of(parts.begin() + 2, parts.end(), [](std::string_view overload) {
    return overload.find("out") != overload.npos || contains(kOutOverloads, overload);
  });
}

NodeId Graph::add_input(std::string name, TensorType type) {
  const auto id = static_cast<NodeId>(nodes_.size());
  Attrs attrs{{"position", static_cast<std::int64_t>(inputs_.size())}};
  nodes_.push_back(
      Node{std::move(name), std::string(kInputOp), std::move(attrs), {}, {std::move(type)}, false});
  inputs_.push_back(id);
  return id;
}

tl::expected<void, GraphError> Graph::check_ref(const ValueRef& ref) const {
  if (ref.node >= nodes_.size()) {
    return tl::unexpected(GraphError{"reference to unknown node #" + std::to_string(ref.node)});
  }
  const Node& producer = nodes_[ref.node];
  if (ref.output >= producer.outputs.size()) {
    return tl::unexpected(
        GraphError{"node '" + producer.name + "' has no output " + std::to_string(ref.output)});
  }
  return {};
}

tl::expected<NodeId, GraphError> Graph::add_node(std::string name, std::string op,
                                                 std::vector<ValueRef> inputs,
                                                 std::vector<TensorType> outputs, Attrs attrs) {
  if (op.empty()) {
    return tl::unexpected(GraphError{"node '" + name + "' has an empty op"});
  }
  if (op == kInputOp) {
    return tl::unexpected(GraphError{"use add_input for graph inputs ('" + name + "')"});
  }
  for (const ValueRef& ref : inputs) {
    if (auto ok = check_ref(ref); !ok) {
      return tl::unexpected(GraphError{"node '" + name + "': " + ok.error().message});
    }
  }
  const auto id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(Node{std::move(name), std::move(op), std::move(attrs), std::move(inputs),
                        std::move(outputs), false});
  return id;
}

tl::expected<void, GraphError> Graph::mark_effectful(NodeId node) {
  if (node >= nodes_.size()) {
    return tl::unexpected(GraphError{"reference to unknown node #" + std::to_string(node)});
  }
  if (nodes_[node].op == kInputOp) {
    return tl::unexpected(GraphError{"graph input '" + nodes_[node].name + "' has no effects"});
  }
  nodes_[node].effectful = true;
  return {};
}

tl::expected<void, GraphError> Graph::add_output(ValueRef value) {
  if (auto ok = check_ref(value); !ok) {
    return ok;
  }
  outputs_.push_back(value);
  return {};
}

} // namespace kcache::cachekey
