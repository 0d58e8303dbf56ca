#include <kcache/cachekey/graph_json.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

namespace kcache::cachekey {
namespace {

using nlohmann::json;
using GraphUnexpected = tl::unexpected<GraphError>;

GraphUnexpected fail(std::string message) {
  return GraphUnexpected(GraphError{std::move(message)});
}

// nlohmann reads an integer literal beyond uint64 as a double and one beyond
// int64 as unsigned; either would reach the key as a different number. Every
// integer in a graph is an int64 (dims, strides, attributes), so any integer
// literal outside that range is refused here, by its text.
tl::expected<void, GraphError> check_integer_literals(std::string_view text) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      i += c == '\\' ? 1 : 0;
      in_string = c != '"';
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c != '-' && !digit(c)) {
      continue;
    }
    std::size_t end = i + 1;
    while (end < text.size() && (digit(text[end]) || std::string_view(".eE+-").find(text[end]) !=
                                                         std::string_view::npos)) {
      ++end;
    }
    const std::string_view literal = text.substr(i, end - i);
    if (literal.find_first_of(".eE") == std::string_view::npos) {
      std::int64_t value = 0;
      const auto [ptr, ec] =
          std::from_chars(literal.data(), literal.data() + literal.size(), value);
      if (ec == std::errc::result_out_of_range) {
        return fail("integer " + std::string(literal) + " at offset " + std::to_string(i) +
                    " is outside the int64 range");
      }
    }
    i = end - 1;
  }
  return {};
}

tl::expected<std::vector<Dim>, GraphError> parse_dims(const json& dims, std::string_view what) {
  if (!dims.is_array()) {
    return fail(std::string(what) + " must be an array");
  }
  std::vector<Dim> out;
  for (const json& d : dims) {
    // check_integer_literals refused every integer outside int64 already.
    if (d.is_number_integer()) {
      out.push_back(Dim::fixed(d.get<std::int64_t>()));
    } else if (d.is_string() && !d.get_ref<const std::string&>().empty()) {
      out.push_back(Dim::symbol(d.get<std::string>()));
    } else {
      return fail(std::string(what) + " entries must be integers or symbol names");
    }
  }
  return out;
}

tl::expected<TensorType, GraphError> parse_type(const json& j) {
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string()) {
    return fail("a tensor type needs a string \"dtype\"");
  }
  TensorType type;
  type.dtype = j["dtype"].get<std::string>();
  auto shape = parse_dims(j.value("shape", json::array()), "shape");
  if (!shape) {
    return GraphUnexpected(shape.error());
  }
  type.shape = std::move(*shape);
  auto strides = parse_dims(j.value("strides", json::array()), "strides");
  if (!strides) {
    return GraphUnexpected(strides.error());
  }
  type.strides = std::move(*strides);
  if (!type.strides.empty() && type.strides.size() != type.shape.size()) {
    return fail("strides and shape of a " + type.dtype + " tensor differ in rank");
  }
  return type;
}

tl::expected<AttrValue, GraphError> parse_attr(const json& j) {
  switch (j.type()) {
  case json::value_t::null:
    return AttrValue{};
  case json::value_t::boolean:
    return AttrValue(j.get<bool>());
  case json::value_t::number_integer:
  case json::value_t::number_unsigned: // within int64: check_integer_literals
    return AttrValue(j.get<std::int64_t>());
  case json::value_t::number_float:
    // JSON cannot write inf; a literal that overflows a double is refused.
    if (!std::isfinite(j.get<double>())) {
      return fail("attribute float out of double range");
    }
    return AttrValue(j.get<double>());
  case json::value_t::string:
    return AttrValue(j.get<std::string>());
  case json::value_t::array: {
    AttrValue::List list;
    for (const json& item : j) {
      auto v = parse_attr(item);
      if (!v) {
        return v;
      }
      list.push_back(std::move(*v));
    }
    return AttrValue(std::move(list));
  }
  default:
    return fail("attribute values must be null, bool, number, string or array");
  }
}

struct Ref {
  std::string node;
  std::uint32_t output = 0;
};

tl::expected<Ref, GraphError> parse_ref(const json& j) {
  if (!j.is_string()) {
    return fail("references must be strings \"node\" or \"node:output\"");
  }
  const auto& s = j.get_ref<const std::string&>();
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) {
    return Ref{s, 0};
  }
  std::uint32_t index = 0;
  const char* first = s.data() + colon + 1;
  const char* last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, index);
  if (ec != std::errc() || ptr != last || first == last) {
    return fail("bad output index in reference '" + s + "'");
  }
  return Ref{s.substr(0, colon), index};
}

struct PendingNode {
  std::string name;
  std::string op;
  Attrs attrs;
  std::vector<Ref> inputs;
  std::vector<TensorType> outputs;
  bool effectful = false;
};

tl::expected<PendingNode, GraphError> parse_node(const json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("op") ||
      !j["op"].is_string()) {
    return fail("every node needs a string \"name\" and \"op\"");
  }
  PendingNode node{j["name"].get<std::string>(), j["op"].get<std::string>(), {}, {}, {}, false};
  const std::string where = "node '" + node.name + "': ";
  if (const auto it = j.find("effectful"); it != j.end()) {
    if (!it->is_boolean()) {
      return fail(where + "\"effectful\" must be true or false");
    }
    node.effectful = it->get<bool>();
  }
  const json attrs = j.value("attrs", json::object());
  if (!attrs.is_object()) {
    return fail(where + "\"attrs\" must be an object");
  }
  for (const auto& [key, value] : attrs.items()) {
    auto attr = parse_attr(value);
    if (!attr) {
      return fail(where + attr.error().message);
    }
    node.attrs.emplace(key, std::move(*attr));
  }
  for (const json& in : j.value("inputs", json::array())) {
    auto ref = parse_ref(in);
    if (!ref) {
      return fail(where + ref.error().message);
    }
    node.inputs.push_back(std::move(*ref));
  }
  for (const json& out : j.value("outputs", json::array())) {
    auto type = parse_type(out);
    if (!type) {
      return fail(where + type.error().message);
    }
    node.outputs.push_back(std::move(*type));
  }
  return node;
}

bool is_effectful(const PendingNode& node) {
  return node.effectful || is_effectful_op(node.op);
}

// Effects happen in file order, and every node keeps its place among them. A
// node may name a node listed after it (that node is added first), but only
// when no effectful node lies between them, the named one included: moving it
// (and whatever it reads) ahead would reorder it against that effect.
tl::expected<void, GraphError>
check_forward_references(const std::vector<PendingNode>& pending,
                         const std::map<std::string, std::size_t>& index) {
  std::vector<std::size_t> effects_before(pending.size() + 1, 0); // in [0, i)
  for (std::size_t i = 0; i < pending.size(); ++i) {
    effects_before[i + 1] = effects_before[i] + (is_effectful(pending[i]) ? 1 : 0);
  }
  for (std::size_t i = 0; i < pending.size(); ++i) {
    for (const Ref& ref : pending[i].inputs) {
      const auto it = index.find(ref.node);
      if (it == index.end() || it->second <= i) {
        continue;
      }
      const std::size_t later = it->second;
      if (effects_before[later + 1] == effects_before[i + 1]) {
        continue;
      }
      const std::string reason = is_effectful(pending[later])
                                     ? "effectful node '" + ref.node + "'"
                                     : "'" + ref.node + "', listed after an effectful node";
      return fail("node '" + pending[i].name + "' refers to " + reason +
                  " below it: effects keep the order of the file, so list nodes after the "
                  "effects they read");
    }
  }
  return {};
}

// Adds nodes in dependency order (a node may be listed before its inputs, as
// check_forward_references allows).
tl::expected<void, GraphError> add_in_dependency_order(Graph& graph,
                                                       std::vector<PendingNode>& pending,
                                                       std::map<std::string, NodeId>& ids) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (ids.count(pending[i].name) || !index.emplace(pending[i].name, i).second) {
      return fail("duplicate node name '" + pending[i].name + "'");
    }
  }
  if (auto ok = check_forward_references(pending, index); !ok) {
    return ok;
  }
  enum class Mark { kNone, kVisiting, kDone };
  std::vector<Mark> marks(pending.size(), Mark::kNone);

  // Iterative DFS keeps deep chains from exhausting the stack.
  for (std::size_t root = 0; root < pending.size(); ++root) {
    std::vector<std::pair<std::size_t, std::size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [current, next_input] = stack.back();
      PendingNode& node = pending[current];
      if (marks[current] == Mark::kDone) {
        stack.pop_back();
        continue;
      }
      marks[current] = Mark::kVisiting;
      if (next_input < node.inputs.size()) {
        const Ref& ref = node.inputs[next_input++];
        if (ids.count(ref.node)) {
          continue;
        }
        const auto it = index.find(ref.node);
        if (it == index.end()) {
          return fail("node '" + node.name + "' refers to unknown node '" + ref.node + "'");
        }
        if (marks[it->second] == Mark::kVisiting) {
          return fail("cycle through node '" + ref.node + "'");
        }
        stack.emplace_back(it->second, 0);
        continue;
      }
      std::vector<ValueRef> inputs;
      for (const Ref& ref : node.inputs) {
        inputs.push_back(ValueRef{ids.at(ref.node), ref.output});
      }
      auto id = graph.add_node(node.name, node.op, std::move(inputs), std::move(node.outputs),
                               std::move(node.attrs));
      if (!id) {
        return GraphUnexpected(id.error());
      }
      if (node.effectful) {
        (void)graph.mark_effectful(*id); // *id was just added: cannot fail
      }
      ids.emplace(node.name, *id);
      marks[current] = Mark::kDone;
      stack.pop_back();
    }
  }
  return {};
}

json dims_to_json(const std::vector<Dim>& dims) {
  json out = json::array();
  for (const Dim& d : dims) {
    std::visit([&](const auto& v) { out.push_back(v); }, d.value);
  }
  return out;
}

json type_to_json(const TensorType& type) {
  json out{{"dtype", type.dtype}, {"shape", dims_to_json(type.shape)}};
  if (!type.strides.empty()) {
    out["strides"] = dims_to_json(type.strides);
  }
  return out;
}

json attr_to_json(const AttrValue& attr) {
  return std::visit(
      [](const auto& v) -> json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, AttrValue::List>) {
          json list = json::array();
          for (const AttrValue& item : v) {
            list.push_back(attr_to_json(item));
          }
          return list;
        } else {
          return v;
        }
      },
      attr.value);
}

} // namespace

namespace {
tl::expected<Graph, GraphError> parse_document(const json& doc);
} // namespace

tl::expected<Graph, GraphError> parse_graph_json(std::string_view text) {
  const json doc = protocol::parse_json_or_discarded(text);
  if (!doc.is_discarded()) {
    if (auto ok = check_integer_literals(text); !ok) {
      return GraphUnexpected(ok.error());
    }
  }
  try {
    return parse_document(doc);
  } catch (const json::exception& e) {
    // nlohmann reports a field of the wrong type by exception; it ends here.
    return fail(std::string("graph: ") + e.what());
  }
}

namespace {
tl::expected<Graph, GraphError> parse_document(const json& doc) {
  if (doc.is_discarded()) {
    return fail("graph is not valid JSON");
  }
  if (!doc.is_object()) {
    return fail("graph must be a JSON object");
  }
  if (doc.value("format", std::string("kcache-graph/1")) != "kcache-graph/1") {
    return fail("unsupported graph format '" + doc["format"].dump() + "'");
  }
  Graph graph;
  std::map<std::string, NodeId> ids;
  for (const json& in : doc.value("inputs", json::array())) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) {
      return fail("every input needs a string \"name\"");
    }
    const auto name = in["name"].get<std::string>();
    auto type = parse_type(in.value("type", json()));
    if (!type) {
      return fail("input '" + name + "': " + type.error().message);
    }
    if (ids.count(name)) {
      return fail("duplicate input name '" + name + "'");
    }
    ids.emplace(name, graph.add_input(name, std::move(*type)));
  }
  std::vector<PendingNode> pending;
  for (const json& n : doc.value("nodes", json::array())) {
    auto node = parse_node(n);
    if (!node) {
      return GraphUnexpected(node.error());
    }
    pending.push_back(std::move(*node));
  }
  if (auto ok = add_in_dependency_order(graph, pending, ids); !ok) {
    return GraphUnexpected(ok.error());
  }
  for (const json& out : doc.value("outputs", json::array())) {
    auto ref = parse_ref(out);
    if (!ref) {
      return GraphUnexpected(ref.error());
    }
    const auto it = ids.find(ref->node);
    if (it == ids.end()) {
      return fail("output refers to unknown node '" + ref->node + "'");
    }
    if (auto ok = graph.add_output(ValueRef{it->second, ref->output}); !ok) {
      return GraphUnexpected(ok.error());
    }
  }
  return graph;
}
} // namespace

std::string graph_to_json(const Graph& graph) {
  auto ref_name = [&](const ValueRef& ref) {
    const std::string& name = graph.nodes()[ref.node].name;
    return ref.output == 0 ? name : name + ":" + std::to_string(ref.output);
  };
  json doc{{"format", "kcache-graph/1"}, {"inputs", json::array()}, {"nodes", json::array()}};
  for (const Node& node : graph.nodes()) {
    if (node.op == Graph::kInputOp) {
      doc["inputs"].push_back({{"name", node.name}, {"type", type_to_json(node.outputs.at(0))}});
      continue;
    }
    json j{{"name", node.name}, {"op", node.op}, {"inputs", json::array()}};
    if (node.effectful) {
      j["effectful"] = true;
    }
    for (const ValueRef& in : node.inputs) {
      j["inputs"].push_back(ref_name(in));
    }
    if (!node.attrs.empty()) {
      json attrs = json::object();
      for (const auto& [key, value] : node.attrs) {
        attrs[key] = attr_to_json(value);
      }
      j["attrs"] = std::move(attrs);
    }
    j["outputs"] = json::array();
    for (const TensorType& type : node.outputs) {
      j["outputs"].push_back(type_to_json(type));
    }
    doc["nodes"].push_back(std::move(j));
  }
  doc["outputs"] = json::array();
  for (const ValueRef& out : graph.outputs()) {
    doc["outputs"].push_back(ref_name(out));
  }
  return doc.dump(2);
}

} // namespace kcache::cachekey
