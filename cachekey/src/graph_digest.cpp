#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/graph_digest.h>

#include <algorithm>
#include <set>

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

SymbolMap canonical_symbols(const Graph& graph) {
  std::vector<std::string> ordered;
  std::set<std::string, std::less<>> seen;
  for (NodeId id : graph.inputs()) {
    for (const TensorType& type : graph.nodes()[id].outputs) {
      collect_symbols(type, ordered, seen);
    }
  }
  std::vector<std::string> internal;
  std::set<std::string, std::less<>> internal_seen = seen;
  for (const Node& node : graph.nodes()) {
    for (const TensorType& type : node.outputs) {
      collect_symbols(type, internal, internal_seen);
    }
  }
  std::sort(internal.begin(), internal.end());
  ordered.insert(ordered.end(), internal.begin(), internal.end());

  SymbolMap map;
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    map.emplace(ordered[i], "s" + std::to_string(i));
  }
  return map;
}

// Explicit row-major strides over a fully static shape say nothing beyond the
// shape itself; dropping them avoids a needless miss against an empty list.
bool is_default_contiguous(const TensorType& type) {
  if (type.strides.empty()) {
    return true;
  }
  if (type.strides.size() != type.shape.size()) {
    return false;
  }
  std::int64_t expected = 1;
  for (std::size_t i = type.shape.size(); i-- > 0;) {
    const auto* size = std::get_if<std::int64_t>(&type.shape[i].value);
    const auto* stride = std::get_if<std::int64_t>(&type.strides[i].value);
    if (size == nullptr || stride == nullptr || *stride != expected) {
      return false;
    }
    expected *= *size;
  }
  return true;
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

void encode_attr(CanonicalWriter& w, const AttrValue& attr) {
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
          w.str(v);
        } else {
          w.list(v.size());
          for (const AttrValue& item : v) {
            encode_attr(w, item);
          }
        }
      },
      attr.value);
}

Digest digest_node(const Node& node, const std::vector<Digest>& done, const SymbolMap& symbols) {
  CanonicalWriter w;
  w.tag("node").str(node.op);
  w.list(node.attrs.size());
  for (const auto& [name, value] : node.attrs) {
    w.str(name);
    encode_attr(w, value);
  }
  w.list(node.outputs.size());
  for (const TensorType& type : node.outputs) {
    encode_type(w, type, symbols);
  }
  w.list(node.inputs.size());
  for (const ValueRef& ref : node.inputs) {
    w.digest(done[ref.node]).u64(ref.output);
  }
  return w.sha256();
}

} // namespace

GraphDigest digest_graph(const Graph& graph) {
  GraphDigest result;
  result.symbols = canonical_symbols(graph);
  result.node_digests.reserve(graph.nodes().size());
  // Node ids are a topological order: add_node only accepts existing inputs.
  for (const Node& node : graph.nodes()) {
    result.node_digests.push_back(digest_node(node, result.node_digests, result.symbols));
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
