#include <kcache/cachekey/key_manifest.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

namespace kcache::cachekey {

using nlohmann::json;

std::string manifest_to_json(const KeyManifest& m) {
  json nodes = json::array();
  for (const NodeSummary& n : m.graph_nodes) {
    nodes.push_back({{"name", n.name},
                     {"op", n.op},
                     {"attrs", n.attrs},
                     {"outputs", n.outputs},
                     {"inputs", n.inputs},
                     {"digest", n.digest}});
  }
  const json doc{{"schema_version", m.schema_version},
                 {"key", m.key()},
                 {"namespace", m.ns},
                 {"graph_digest", m.graph_digest},
                 {"graph_nodes", std::move(nodes)},
                 {"guards", m.guards},
                 {"hardware_class", m.hardware_class},
                 {"toolchain", m.toolchain},
                 {"options", m.options},
                 {"salt", m.salt}};
  return protocol::json_text(doc);
}

tl::expected<KeyManifest, KeyError> manifest_from_json(std::string_view text) {
  const json doc = protocol::parse_json_or_discarded(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(KeyError{"key manifest is not a JSON object"});
  }
  try {
    KeyManifest m;
    m.schema_version = doc.at("schema_version").get<std::uint32_t>();
    m.ns = doc.at("namespace").get<std::string>();
    m.graph_digest = doc.at("graph_digest").get<std::string>();
    for (const json& n : doc.value("graph_nodes", json::array())) {
      m.graph_nodes.push_back(NodeSummary{
          n.at("name").get<std::string>(), n.at("op").get<std::string>(),
          n.at("attrs").get<std::string>(), n.at("outputs").get<std::vector<std::string>>(),
          n.at("inputs").get<std::vector<std::uint32_t>>(), n.at("digest").get<std::string>()});
    }
    m.guards = doc.at("guards").get<std::vector<std::string>>();
    m.hardware_class = doc.at("hardware_class").get<std::string>();
    m.toolchain = doc.at("toolchain").get<std::map<std::string, std::string>>();
    m.options = doc.at("options").get<std::vector<std::string>>();
    m.salt = doc.value("salt", std::string());
    for (const NodeSummary& n : m.graph_nodes) {
      for (std::uint32_t in : n.inputs) {
        if (in >= m.graph_nodes.size()) {
          return tl::unexpected(KeyError{"key manifest: node input out of range"});
        }
      }
    }
    // A stored manifest must describe the key it was stored under.
    if (doc.contains("key") && doc["key"].get<std::string>() != m.key()) {
      return tl::unexpected(KeyError{"key manifest does not hash to its recorded key"});
    }
    return m;
  } catch (const json::exception& e) {
    // nlohmann reports type and missing-field errors by exception; they stop here.
    return tl::unexpected(KeyError{std::string("key manifest: ") + e.what()});
  }
}

} // namespace kcache::cachekey
