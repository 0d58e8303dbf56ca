#include <kcache/cachekey/graph.h>

namespace kcache::cachekey {

NodeId Graph::add_input(std::string name, TensorType type) {
  const auto id = static_cast<NodeId>(nodes_.size());
  Attrs attrs{{"position", static_cast<std::int64_t>(inputs_.size())}};
  nodes_.push_back(
      Node{std::move(name), std::string(kInputOp), std::move(attrs), {}, {std::move(type)}});
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
                        std::move(outputs)});
  return id;
}

tl::expected<void, GraphError> Graph::add_output(ValueRef value) {
  if (auto ok = check_ref(value); !ok) {
    return ok;
  }
  outputs_.push_back(value);
  return {};
}

} // namespace kcache::cachekey
