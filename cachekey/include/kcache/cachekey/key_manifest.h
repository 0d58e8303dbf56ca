#pragma once
// The key manifest: every component that decides a compiled artifact, kept in
// readable form so `kcache explain` can say which one made two keys differ.
// The key is "kc1-" + SHA-256 over the canonical encoding of the component
// digests; the per-node graph summary and other explanatory fields are stored
// next to the artifact but never hashed twice.

#include <kcache/cachekey/graph.h>
#include <kcache/cachekey/hardware.h>
#include <kcache/cachekey/toolchain.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kcache::cachekey {

// Bump whenever the encoding of any component changes: old keys must not hit.
// 2: guards parsed and renamed with the graph's inputs; effectful graph nodes;
// symbolic row-major strides; data-dependent symbols by first use.
inline constexpr std::uint32_t kKeySchemaVersion = 2;
inline constexpr std::string_view kKeyPrefix = "kc1-";

// One graph node as explain reports it.
struct NodeSummary {
  std::string name;
  std::string op;
  std::string attrs;                 // canonical text
  std::vector<std::string> outputs;  // canonical type strings
  std::vector<std::uint32_t> inputs; // indices into KeyManifest::graph_nodes
  std::string digest;                // hex
  friend bool operator==(const NodeSummary&, const NodeSummary&) = default;
};

struct KeyManifest {
  std::uint32_t schema_version = kKeySchemaVersion;
  std::string ns;
  std::string graph_digest; // hex; a client may supply its own graph hash
  std::vector<NodeSummary> graph_nodes;
  std::vector<std::string> guards; // normalized
  std::string hardware_class;      // binary class for artifacts, tuning class for records
  std::map<std::string, std::string> toolchain;
  std::vector<std::string> options; // normalized
  std::string salt;

  std::string guards_digest() const;
  std::string toolchain_digest() const;
  std::string options_digest() const;
  // "kc1-<64 hex>", derived from the fields above.
  std::string key() const;
  friend bool operator==(const KeyManifest&, const KeyManifest&) = default;
};

struct KeyError {
  std::string message;
};

// Builds a manifest from raw parts, normalizing guards (with the graph's
// symbol and input names: GuardNames::for_graph) and options.
class KeyBuilder {
public:
  KeyBuilder& ns(std::string value);
  KeyBuilder& graph(const Graph& graph);
  // For clients that hash their graphs themselves (e.g. Inductor's FX key).
  KeyBuilder& graph_digest(std::string hex);
  KeyBuilder& guards(std::vector<std::string> raw_guards);
  KeyBuilder& hardware(std::string hardware_class);
  KeyBuilder& toolchain(const ToolchainFingerprint& toolchain);
  KeyBuilder& options(std::vector<std::string> raw_flags);
  KeyBuilder& salt(std::string value);

  tl::expected<KeyManifest, KeyError> build() const;

private:
  KeyManifest manifest_;
  std::optional<Graph> graph_;
  std::vector<std::string> raw_guards_;
  std::vector<std::string> raw_options_;
};

bool is_valid_key(std::string_view key);

std::string manifest_to_json(const KeyManifest& manifest);
tl::expected<KeyManifest, KeyError> manifest_from_json(std::string_view text);

} // namespace kcache::cachekey
