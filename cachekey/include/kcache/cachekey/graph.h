#pragma once
// A computation graph as the key sees it: a DAG of ops whose edges are
// (producer node, output index) references. Nodes can only refer to nodes that
// already exist, so a Graph built through this API is acyclic by construction.

#include <kcache/cachekey/attr_value.h>
#include <kcache/cachekey/tensor_type.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
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
  bool effectful = false; // set by the client; is_effectful_op() adds known ops
};

// Ops whose result is not a function of their inputs, or that act on state
// beyond their outputs. Two such nodes are never interchangeable, however
// alike, and their order among each other is part of the program. The op is
// read as [torch.ops.]namespace.name[.overload], with `.` or `::` between the
// parts ("aten::add_.Tensor"); a bare name is the name. The rule is broad on
// purpose: counting a pure op costs a needless miss, missing an effectful one
// is a false hit. So a name or prefix below also catches pure ops that
// contain it (aten.normalize, aten.to.dtype_layout, __invert__, printable,
// the _functional and _no_training batch norms): misses by design.
//   - random: names starting (after "native_" or "_fused_") with rand,
//     bernoulli, dropout (feature/alpha variants), normal, uniform,
//     multinomial, exponential, geometric, cauchy, log_normal, poisson,
//     binomial, rrelu, _standard_gamma, _sample_dirichlet; names containing
//     random, philox, seed or rng; attention kernels that draw dropout masks
//     (scaled_dot_product*, *flash_attention*, *efficient_attention*,
//     *cudnn_attention*); RNNs (rnn, lstm, gru anywhere in the name);
//   - uninitialized memory: empty*, new_empty*;
//   - in place: a name (the op without namespace and overload) ending in a
//     single '_' (add_, copy_, index_put_) or written __i...__ (__iadd__);
//     resize*, copy_to; names containing batch_norm, instance_norm or
//     moving_avg (running statistics are updated in place); names containing
//     mutation or auto_functionalized;
//   - out= variants: an overload name containing "out" (out, Scalar_out,
//     IntList_out, output, no_stats_out) or one of the other out overload
//     names of aten (values, values_stable, dim_values, dim_max, dim_min,
//     names_dim_*, dimname_values*, grad_input, eigvals, eigenvalues,
//     inverse, result, sign, solution, U, Q, X, L);
//   - communication: namespaces c10d, _c10d_functional, c10d_functional,
//     c10d_ops, _dtensor; names containing all_reduce, all_gather,
//     reduce_scatter, all_to_all, wait_tensor, isend, irecv; broadcast (not
//     broadcast_to), barrier*, send*, recv*;
//   - higher-order ops: the whole higher_order namespace (with_effects,
//     triton_kernel_wrapper_mutation, auto_functionalized, cond, ...): they
//     run subgraphs or kernels the key does not see;
//   - other effects: names containing assert, constrain_range, print, token, with_effects,
//     record_stream, _local_scalar_dense.
// Anything else (a custom op that mutates, an out overload of another name)
// must be marked by the client: Node::effectful, "effectful": true in JSON.
bool is_effectful_op(std::string_view op);

// The client's flag or the op list above.
inline bool is_effectful(const Node& node) {
  return node.effectful || is_effectful_op(node.op);
}

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
  // Marks a node as having effects (see is_effectful_op) when its op is not
  // known to have them; graph inputs cannot be effectful.
  tl::expected<void, GraphError> mark_effectful(NodeId node);

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
