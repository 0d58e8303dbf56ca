#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/graph_digest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

namespace kcache::cachekey {
namespace {

void collect_symbols(const TensorType& type, std::vector<std::string>& ordered,
                     std::set<std::string, std::less<>>& seen) {
  auto visit = [&](const Dim& dim) {
    if (const auto* name = std::get_if<std::string>(&dim.value)) {
      if (seen.insert(*name).second) {
        ordered.push_back(*name);
      }
    }
  };
  std::for_each(type.shape.begin(), type.shape.end(), visit);
  std::for_each(type.strides.begin(), type.strides.end(), visit);
}

// Nodes in a topological order that ignores names and the order independent
// nodes were added: depth-first from the graph outputs in output order, each
// node after its inputs (in input order); nodes no output reaches follow in
// graph order.
std::vector<NodeId> canonical_order(const Graph& graph) {
  const auto& nodes = graph.nodes();
  std::vector<bool> placed(nodes.size(), false);
  std::vector<NodeId> order;
  order.reserve(nodes.size());
  // Iterative, so deep chains cannot exhaust the stack.
  std::vector<std::pair<NodeId, std::size_t>> stack;
  auto visit = [&](NodeId root) {
    if (placed[root]) {
      return;
    }
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      if (next < nodes[id].inputs.size()) {
        const NodeId in = nodes[id].inputs[next++].node;
        if (!placed[in]) {
          stack.emplace_back(in, 0); // inputs have smaller ids: no cycles
        }
        continue;
      }
      if (!placed[id]) {
        placed[id] = true;
        order.push_back(id);
      }
      stack.pop_back();
    }
  };
  for (const ValueRef& out : graph.outputs()) {
    visit(out.node);
  }
  for (NodeId id = 0; id < nodes.size(); ++id) {
    visit(id);
  }
  return order;
}

SymbolMap canonical_symbols(const Graph& graph) {
  std::vector<std::string> ordered;
  std::set<std::string, std::less<>> seen;
  for (NodeId id : graph.inputs()) {
    for (const TensorType& type : graph.nodes()[id].outputs) {
      collect_symbols(type, ordered, seen);
    }
  }
  // Data-dependent symbols (u0 = nonzero(x).size(0)) by first use, not by name.
  for (NodeId id : canonical_order(graph)) {
    for (const TensorType& type : graph.nodes()[id].outputs) {
      collect_symbols(type, ordered, seen);
    }
  }
  SymbolMap map;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    map.emplace(ordered[i], "s" + std::to_string(i));
  }
  return map;
}

// A symbolic product: coefficient times symbols (an expected row-major stride).
struct Product {
  std::int64_t coefficient = 1;
  std::vector<std::string> symbols;
};

// Whether `stride` spells exactly `expected` (a Dim holds one constant or one symbol).
bool spells(const Dim& stride, const Product& expected) {
  if (const auto* value = std::get_if<std::int64_t>(&stride.value)) {
    return expected.symbols.empty() && *value == expected.coefficient;
  }
  return expected.coefficient == 1 && expected.symbols.size() == 1 &&
         expected.symbols.front() == std::get<std::string>(stride.value);
}

// Explicit row-major strides say nothing beyond the shape; dropping them avoids
// a needless miss against an empty list. Symbolic sizes count too: shape
// [s0, s1] with strides [s1, 1] is row-major.
bool is_default_contiguous(const TensorType& type) {
  if (type.strides.empty()) {
    return true;
  }
  if (type.strides.size() != type.shape.size()) {
    return false;
  }
  Product expected;
  for (std::size_t i = type.shape.size(); i-- > 0;) {
    if (!spells(type.strides[i], expected)) {
      return false;
    }
    if (const auto* size = std::get_if<std::int64_t>(&type.shape[i].value)) {
      if (__builtin_mul_overflow(expected.coefficient, *size, &expected.coefficient)) {
        return false;
      }
    } else {
      expected.symbols.push_back(std::get<std::string>(type.shape[i].value));
    }
  }
  return true;
}

// Where each node stands among the graph's effects, in graph (program) order:
// an effectful node's ordinal among effectful nodes; any other node, the
// number of effects before it (it may read state they changed). Graph inputs
// are read at entry: 0.
struct EffectPositions {
  std::vector<std::uint64_t> positions;
  std::vector<bool> effectful;
};

EffectPositions effect_positions(const Graph& graph) {
  EffectPositions out;
  out.positions.reserve(graph.nodes().size());
  out.effectful.reserve(graph.nodes().size());
  std::uint64_t effects = 0;
  // A graph repeats few ops many times: read each op name once.
  std::unordered_map<std::string_view, bool> effectful_op;
  for (const Node& node : graph.nodes()) {
    const auto known = effectful_op.try_emplace(node.op, false);
    if (known.second) {
      known.first->second = is_effectful_op(node.op);
    }
    const bool effectful = node.op != Graph::kInputOp && (node.effectful || known.first->second);
    out.effectful.push_back(effectful);
    out.positions.push_back(node.op == Graph::kInputOp ? 0 : effectful ? effects++ : effects);
  }
  return out;
}

// Which effects may write each pure node: those reading it, and those reading
// a pure node computed from it (a view aliases its base), as one digest; none
// for a node no effect reaches so. An in-place op writes one of two look-alike
// nodes, and from then on they differ. Graph inputs are apart by position.
std::vector<std::optional<Digest>> written_by(const Graph& graph, const EffectPositions& effects) {
  const auto& nodes = graph.nodes();
  std::vector<std::optional<Digest>> out(nodes.size());
  if (std::none_of(effects.effectful.begin(), effects.effectful.end(), [](bool e) { return e; })) {
    return out;
  }
  std::vector<std::vector<std::uint64_t>> reads(nodes.size()); // (effect ordinal, argument)
  std::vector<std::vector<NodeId>> pure_readers(nodes.size());
  for (NodeId id = 0; id < nodes.size(); ++id) {
    for (std::size_t i = 0; i < nodes[id].inputs.size(); ++i) {
      const NodeId read = nodes[id].inputs[i].node;
      if (effects.effectful[id]) {
        reads[read].insert(reads[read].end(), {effects.positions[id], i});
      } else {
        pure_readers[read].push_back(id);
      }
    }
  }
  for (NodeId id = static_cast<NodeId>(nodes.size()); id-- > 0;) { // readers first
    if (nodes[id].op == Graph::kInputOp || effects.effectful[id]) {
      continue;
    }
    std::vector<Digest> downstream;
    for (NodeId reader : pure_readers[id]) {
      if (out[reader]) {
        downstream.push_back(*out[reader]);
      }
    }
    if (reads[id].empty() && downstream.empty()) {
      continue;
    }
    std::sort(downstream.begin(), downstream.end());
    CanonicalWriter w;
    w.tag("written-by").list(reads[id].size());
    for (std::uint64_t v : reads[id]) {
      w.u64(v);
    }
    w.list(downstream.size());
    for (const Digest& d : downstream) {
      w.digest(d);
    }
    out[id] = w.sha256();
  }
  return out;
}

const std::string& canonical_name(const std::string& name, const SymbolMap& symbols) {
  const auto it = symbols.find(name);
  return it == symbols.end() ? name : it->second;
}

void encode_dims(CanonicalWriter& w, const std::vector<Dim>& dims, const SymbolMap& symbols) {
  w.list(dims.size());
  for (const Dim& dim : dims) {
    if (const auto* size = std::get_if<std::int64_t>(&dim.value)) {
      w.i64(*size);
    } else {
      w.str(canonical_name(std::get<std::string>(dim.value), symbols));
    }
  }
}

void encode_type(CanonicalWriter& w, const TensorType& type, const SymbolMap& symbols) {
  w.tag("tensor").str(type.dtype);
  encode_dims(w, type.shape, symbols);
  if (is_default_contiguous(type)) {
    w.list(0);
  } else {
    encode_dims(w, type.strides, symbols);
  }
}

// A string attribute is hashed as written (symbols are never renamed inside
// it: "mean" stays "mean" even when a dim is called mean). When it contains the
// name of one of the graph's symbols, which of the canonical symbols that name
// is follows it, so {"size": ["seq"]} over x:[batch], y:[seq] differs from
// the same attribute over x:[seq], y:[batch].
void encode_string(CanonicalWriter& w, const std::string& value, const SymbolMap& symbols) {
  std::vector<const SymbolMap::value_type*> named;
  for (const auto& entry : symbols) {
    if (value.find(entry.first) != std::string::npos) {
      named.push_back(&entry);
    }
  }
  if (named.empty()) {
    w.str(value);
    return;
  }
  w.tag("str-naming-symbols").str(value).list(named.size());
  for (const auto* entry : named) { // in name order (the map's)
    w.str(entry->first).str(entry->second);
  }
}

void encode_attr(CanonicalWriter& w, const AttrValue& attr, const SymbolMap& symbols) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          w.tag("null");
        } else if constexpr (std::is_same_v<T, bool>) {
          w.boolean(v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          w.i64(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.f64(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          encode_string(w, v, symbols);
        } else {
          w.list(v.size());
          for (const AttrValue& item : v) {
            encode_attr(w, item, symbols);
          }
        }
      },
      attr.value);
}

Digest digest_node(const Node& node, std::uint64_t effect_position,
                   const std::optional<Digest>& written_by, const std::vector<Digest>& done,
                   const SymbolMap& symbols) {
  CanonicalWriter w;
  w.tag("node").str(node.op);
  w.list(node.attrs.size());
  for (const auto& [name, value] : node.attrs) {
    w.str(name);
    encode_attr(w, value, symbols);
  }
  w.list(node.outputs.size());
  for (const TensorType& type : node.outputs) {
    encode_type(w, type, symbols);
  }
  w.list(node.inputs.size());
  for (const ValueRef& ref : node.inputs) {
    w.digest(done[ref.node]).u64(ref.output);
  }
  // Two effectful nodes never share a digest, however alike.
  w.tag(is_effectful(node) ? "effect" : "after-effects").u64(effect_position);
  if (written_by) { // other nodes hash as before
    w.tag("written-by").digest(*written_by);
  }
  return w.sha256();
}

} // namespace

GraphDigest digest_graph(const Graph& graph) {
  GraphDigest result;
  result.symbols = canonical_symbols(graph);
  result.node_digests.reserve(graph.nodes().size());
  const EffectPositions effects = effect_positions(graph);
  const std::vector<std::optional<Digest>> written = written_by(graph, effects);
  // Node ids are a topological order: add_node only accepts existing inputs.
  for (NodeId id = 0; id < graph.nodes().size(); ++id) {
    result.node_digests.push_back(digest_node(graph.nodes()[id], effects.positions[id], written[id],
                                              result.node_digests, result.symbols));
  }

  CanonicalWriter w;
  w.tag("graph").list(graph.outputs().size());
  for (const ValueRef& out : graph.outputs()) {
    w.digest(result.node_digests[out.node]).u64(out.output);
  }
  std::vector<Digest> all = result.node_digests;
  std::sort(all.begin(), all.end());
  w.list(all.size());
  for (const Digest& d : all) {
    w.digest(d);
  }
  result.root = w.sha256();
  return result;
}

std::string canonical_type_string(const TensorType& type, const SymbolMap& symbols) {
  TensorType renamed = type;
  for (auto* dims : {&renamed.shape, &renamed.strides}) {
    for (Dim& dim : *dims) {
      if (auto* name = std::get_if<std::string>(&dim.value)) {
        *name = canonical_name(*name, symbols);
      }
    }
  }
  if (is_default_contiguous(renamed)) {
    renamed.strides.clear();
  }
  return to_string(renamed);
}

} // namespace kcache::cachekey
