#include <kcache/cachekey/explain.h>

#include <algorithm>
#include <set>

namespace kcache::cachekey {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

// Nodes of `side` that are missing from `other` but whose inputs are all present.
std::vector<std::size_t> frontier(const std::vector<NodeSummary>& side,
                                  const std::set<std::string>& other_digests) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < side.size(); ++i) {
    if (other_digests.count(side[i].digest)) {
      continue;
    }
    const bool inputs_present =
        std::all_of(side[i].inputs.begin(), side[i].inputs.end(),
                    [&](std::uint32_t in) { return other_digests.count(side[in].digest) > 0; });
    if (inputs_present) {
      out.push_back(i);
    }
  }
  return out;
}

std::string describe(const NodeSummary& n) {
  return "'" + n.name + "' (" + n.op + ")";
}

std::string compare_nodes(const KeyManifest& a, const NodeSummary& x, const KeyManifest& b,
                          const NodeSummary& y) {
  std::vector<std::string> what;
  if (x.op != y.op) {
    what.push_back("op " + x.op + " -> " + y.op);
  }
  if (x.attrs != y.attrs) {
    what.push_back("attrs " + x.attrs + " -> " + y.attrs);
  }
  if (x.outputs != y.outputs) {
    what.push_back("outputs " + join(x.outputs) + " -> " + join(y.outputs));
  }
  std::vector<std::string> in_x, in_y;
  for (std::uint32_t i : x.inputs) {
    in_x.push_back(a.graph_nodes[i].digest);
  }
  for (std::uint32_t i : y.inputs) {
    in_y.push_back(b.graph_nodes[i].digest);
  }
  if (in_x != in_y) {
    what.push_back(in_x.size() == in_y.size() ? "inputs reordered or rewired"
                                              : "input count " + std::to_string(in_x.size()) +
                                                    " -> " + std::to_string(in_y.size()));
  }
  return "node " + describe(x) + " vs " + describe(y) + ": " +
         (what.empty() ? std::string("differs") : join(what));
}

ComponentDiff graph_diff(const KeyManifest& a, const KeyManifest& b) {
  ComponentDiff diff{"graph", a.graph_digest, b.graph_digest, {}};
  if (a.graph_nodes.empty() || b.graph_nodes.empty()) {
    diff.details.emplace_back("no per-node summary stored; only the graph digests can be compared");
    return diff;
  }
  std::set<std::string> digests_a, digests_b;
  for (const NodeSummary& n : a.graph_nodes) {
    digests_a.insert(n.digest);
  }
  for (const NodeSummary& n : b.graph_nodes) {
    digests_b.insert(n.digest);
  }
  const auto fa = frontier(a.graph_nodes, digests_b);
  const auto fb = frontier(b.graph_nodes, digests_a);
  const std::size_t paired = std::min(fa.size(), fb.size());
  for (std::size_t i = 0; i < paired; ++i) {
    diff.details.push_back(compare_nodes(a, a.graph_nodes[fa[i]], b, b.graph_nodes[fb[i]]));
  }
  for (std::size_t i = paired; i < fa.size(); ++i) {
    diff.details.push_back("node " + describe(a.graph_nodes[fa[i]]) + " only in A");
  }
  for (std::size_t i = paired; i < fb.size(); ++i) {
    diff.details.push_back("node " + describe(b.graph_nodes[fb[i]]) + " only in B");
  }
  if (diff.details.empty()) {
    diff.details.emplace_back("same nodes; the graph outputs or node multiplicities differ");
  }
  return diff;
}

template <typename Container>
ComponentDiff set_diff(std::string component, const Container& a, const Container& b) {
  std::vector<std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  ComponentDiff diff{std::move(component),
                     join(std::vector<std::string>(a.begin(), a.end())),
                     join(std::vector<std::string>(b.begin(), b.end())),
                     {}};
  std::vector<std::string> only_a, only_b;
  std::set_difference(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(only_a));
  std::set_difference(sb.begin(), sb.end(), sa.begin(), sa.end(), std::back_inserter(only_b));
  for (const auto& s : only_a) {
    diff.details.push_back("only in A: " + s);
  }
  for (const auto& s : only_b) {
    diff.details.push_back("only in B: " + s);
  }
  if (diff.details.empty()) {
    diff.details.emplace_back("same entries in a different order");
  }
  return diff;
}

ComponentDiff toolchain_diff(const KeyManifest& a, const KeyManifest& b) {
  ComponentDiff diff{"toolchain", a.toolchain_digest(), b.toolchain_digest(), {}};
  std::set<std::string> names;
  for (const auto& [k, v] : a.toolchain) {
    names.insert(k);
  }
  for (const auto& [k, v] : b.toolchain) {
    names.insert(k);
  }
  for (const std::string& name : names) {
    const auto ia = a.toolchain.find(name);
    const auto ib = b.toolchain.find(name);
    const std::string va = ia == a.toolchain.end() ? "(absent)" : ia->second;
    const std::string vb = ib == b.toolchain.end() ? "(absent)" : ib->second;
    if (va != vb) {
      std::string line = name;
      line.append(": ").append(va).append(" -> ").append(vb);
      diff.details.push_back(std::move(line));
    }
  }
  return diff;
}

} // namespace

Explanation explain(const KeyManifest& a, const KeyManifest& b) {
  Explanation e{a.key(), b.key(), {}};
  auto simple = [&](std::string component, const std::string& va, const std::string& vb) {
    if (va != vb) {
      e.diffs.push_back(ComponentDiff{std::move(component), va, vb, {va + " -> " + vb}});
    }
  };
  simple("schema_version", std::to_string(a.schema_version), std::to_string(b.schema_version));
  simple("namespace", a.ns, b.ns);
  if (a.graph_digest != b.graph_digest) {
    e.diffs.push_back(graph_diff(a, b));
  }
  if (a.guards_digest() != b.guards_digest()) {
    e.diffs.push_back(set_diff("guards", a.guards, b.guards));
  }
  simple("hardware_class", a.hardware_class, b.hardware_class);
  if (a.toolchain_digest() != b.toolchain_digest()) {
    e.diffs.push_back(toolchain_diff(a, b));
  }
  if (a.options_digest() != b.options_digest()) {
    e.diffs.push_back(set_diff("options", a.options, b.options));
  }
  simple("salt", a.salt, b.salt);
  return e;
}

std::string to_text(const Explanation& e) {
  if (e.diffs.empty()) {
    return "keys are identical: " + e.key_a + "\n";
  }
  std::string out = "A: " + e.key_a + "\nB: " + e.key_b + "\n";
  for (const ComponentDiff& d : e.diffs) {
    out += "  " + d.component + " differs\n";
    for (const std::string& line : d.details) {
      out += "    " + line + "\n";
    }
  }
  return out;
}

} // namespace kcache::cachekey
