#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/guards.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/options.h>

#include <algorithm>

namespace kcache::cachekey {

std::string KeyManifest::guards_digest() const {
  return to_hex(cachekey::guards_digest(guards));
}

std::string KeyManifest::toolchain_digest() const {
  ToolchainFingerprint fp;
  for (const auto& [component, version] : toolchain) {
    fp.add(component, version);
  }
  return to_hex(fp.digest());
}

std::string KeyManifest::options_digest() const {
  return to_hex(cachekey::options_digest(options));
}

std::string KeyManifest::key() const {
  CanonicalWriter w;
  w.tag("kcache-key")
      .u64(schema_version)
      .str(ns)
      .str(graph_digest)
      .str(guards_digest())
      .str(hardware_class)
      .str(toolchain_digest())
      .str(options_digest())
      .str(salt);
  return std::string(kKeyPrefix) + to_hex(w.sha256());
}

KeyBuilder& KeyBuilder::ns(std::string value) {
  manifest_.ns = std::move(value);
  return *this;
}
KeyBuilder& KeyBuilder::graph(const Graph& graph) {
  graph_ = graph;
  return *this;
}
KeyBuilder& KeyBuilder::graph_digest(std::string hex) {
  graph_.reset();
  manifest_.graph_digest = std::move(hex);
  return *this;
}
KeyBuilder& KeyBuilder::guards(std::vector<std::string> raw_guards) {
  raw_guards_ = std::move(raw_guards);
  return *this;
}
KeyBuilder& KeyBuilder::hardware(std::string hardware_class) {
  manifest_.hardware_class = std::move(hardware_class);
  return *this;
}
KeyBuilder& KeyBuilder::toolchain(const ToolchainFingerprint& toolchain) {
  manifest_.toolchain = toolchain.components();
  return *this;
}
KeyBuilder& KeyBuilder::options(std::vector<std::string> raw_flags) {
  raw_options_ = std::move(raw_flags);
  return *this;
}
KeyBuilder& KeyBuilder::salt(std::string value) {
  manifest_.salt = std::move(value);
  return *this;
}

tl::expected<KeyManifest, KeyError> KeyBuilder::build() const {
  KeyManifest m = manifest_;
  SymbolMap symbols;
  // With a graph, guards may name only its symbols and inputs (renamed as the
  // digest sees them); with a client's own digest, names are kept verbatim.
  GuardNames guard_names;
  if (graph_) {
    const GraphDigest gd = digest_graph(*graph_);
    symbols = gd.symbols;
    guard_names = GuardNames::for_graph(*graph_, symbols);
    m.graph_digest = to_hex(gd.root);
    m.graph_nodes.clear();
    for (std::size_t id = 0; id < graph_->nodes().size(); ++id) {
      const Node& node = graph_->nodes()[id];
      NodeSummary summary{node.name, node.op, to_string(node.attrs),
                          {},        {},      to_hex(gd.node_digests[id])};
      for (const TensorType& type : node.outputs) {
        summary.outputs.push_back(canonical_type_string(type, symbols));
      }
      for (const ValueRef& ref : node.inputs) {
        summary.inputs.push_back(ref.node);
      }
      m.graph_nodes.push_back(std::move(summary));
    }
  }
  if (m.graph_digest.empty()) {
    return tl::unexpected(KeyError{"a key needs a graph or a graph digest"});
  }
  auto guards = normalize_guards(raw_guards_, guard_names);
  if (!guards) {
    return tl::unexpected(KeyError{guards.error().message});
  }
  m.guards = std::move(*guards);
  m.options = normalize_options(raw_options_);
  return m;
}

bool is_valid_key(std::string_view key) {
  if (!key.starts_with(kKeyPrefix) || key.size() != kKeyPrefix.size() + 64) {
    return false;
  }
  return std::all_of(key.begin() + static_cast<std::ptrdiff_t>(kKeyPrefix.size()), key.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

} // namespace kcache::cachekey
