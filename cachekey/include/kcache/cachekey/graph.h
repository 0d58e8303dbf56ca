#pragma once
// A computation graph as the key sees it: a DAG of ops whose edges are
// (producer node, output index) references. Nodes can only refer to nodes that
// already exist, so a Graph built through this API is acyclic by construction.

#include <kcache/cachekey/attr_value.h>
#include <kcache/cachekey/tensor_type.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kcache::cachekey {

using NodeId = std::uint32_t;

struct ValueRef {
  NodeId node = 0;
  std::uint32_t output = 0;
  friend bool operator==(const ValueRef&, const ValueRef&) = default;
};

struct Node {
  std::string name; // for people only: never hashed
  std::string op;   // "aten.mm", "input", "const", ...
  Attrs attrs;
  std::vector<ValueRef> inputs; // order matters (mm(a, b) != mm(b, a))
  std::vector<TensorType> outputs;
};

struct GraphError {
  std::string message;
};

class Graph {
public:
  // Graph inputs are positional: the i-th call defines argument i.
  NodeId add_input(std::string name, TensorType type);
  // Fails if an input refers to a node or output that does not exist.
  tl::expected<NodeId, GraphError> add_node(std::string name, std::string op,
                                            std::vector<ValueRef> inputs,
                                            std::vector<TensorType> outputs, Attrs attrs = {});
  tl::expected<void, GraphError> add_output(ValueRef value);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<NodeId>& inputs() const { return inputs_; }
  const std::vector<ValueRef>& outputs() const { return outputs_; }

  static constexpr std::string_view kInputOp = "input";

private:
  tl::expected<void, GraphError> check_ref(const ValueRef& ref) const;

  std::vector<Node> nodes_;
  std::vector<NodeId> inputs_;
  std::vector<ValueRef> outputs_;
};

} // namespace kcache::cachekey
