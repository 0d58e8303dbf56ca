#include <kcache/cachekey/graph.h>

#include <algorithm>
#include <array>

namespace kcache::cachekey {
namespace {

constexpr std::array<std::string_view, 5> kCollectiveNamespaces = {
    "c10d", "_c10d_functional", "c10d_functional", "_dtensor", "c10d_ops"};
// Matched as a prefix of the op name, after a leading "native_" or "_fused_".
constexpr std::array<std::string_view, 27> kEffectfulPrefixes = {"rand",
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
                                                                 "_assert",
                                                                 "print",
                                                                 "barrier",
                                                                 "send",
                                                                 "recv",
                                                                 "isend",
                                                                 "irecv"};
// Matched anywhere in the op name.
constexpr std::array<std::string_view, 12> kEffectfulParts = {"random",
                                                              "philox",
                                                              "seed",
                                                              "rng",
                                                              "with_effects",
                                                              "record_stream",
                                                              "_local_scalar_dense",
                                                              "all_reduce",
                                                              "all_gather",
                                                              "reduce_scatter",
                                                              "all_to_all",
                                                              "wait_tensor"};

std::vector<std::string_view> split_dots(std::string_view op) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto dot = op.find('.', start);
    parts.push_back(op.substr(start, dot == std::string_view::npos ? op.npos : dot - start));
    if (dot == std::string_view::npos) {
      return parts;
    }
    start = dot + 1;
  }
}

bool in_place(std::string_view name) {
  if (name.size() > 4 && name.starts_with("__i") && name.ends_with("__")) {
    return true; // __iadd__
  }
  return name.size() > 1 && name.ends_with('_') && !name.ends_with("__");
}

} // namespace

bool is_effectful_op(std::string_view op) {
  std::vector<std::string_view> parts = split_dots(op);
  if (parts.size() > 2 && parts[0] == "torch" && parts[1] == "ops") {
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  const std::string_view ns = parts.size() > 1 ? parts[0] : std::string_view();
  std::string_view name = parts.size() > 1 ? parts[1] : parts[0];
  const bool out_overload = parts.size() > 2 && parts[2] == "out";
  if (out_overload || in_place(name) ||
      std::find(kCollectiveNamespaces.begin(), kCollectiveNamespaces.end(), ns) !=
          kCollectiveNamespaces.end()) {
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
