#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_head.h>

#include <nlohmann/json.hpp>

namespace kcache::protocol {

using nlohmann::json;

tl::expected<json, std::string> to_json(const RecordHead& head) {
  json doc{{"producer", head.producer}, {"metadata", head.metadata}};
  if (!head.manifest_json.empty()) {
    auto manifest = parse_json(head.manifest_json);
    if (!manifest) {
      return tl::unexpected("manifest_json is not JSON: " + manifest.error());
    }
    doc["manifest"] = std::move(*manifest);
  }
  return doc;
}

tl::expected<RecordHead, std::string> record_head_from_json(const json& doc) {
  if (!doc.is_object()) {
    return tl::unexpected(std::string("the record is not a JSON object"));
  }
  RecordHead head;
  if (const auto it = doc.find("producer"); it != doc.end() && !it->is_null()) {
    if (!it->is_string()) {
      return tl::unexpected(std::string("\"producer\" must be a string"));
    }
    head.producer = it->get<std::string>();
  }
  if (const auto it = doc.find("metadata"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) {
      return tl::unexpected(std::string("\"metadata\" must be an object"));
    }
    for (const auto& [name, value] : it->items()) {
      head.metadata[name] = value.is_string() ? value.get<std::string>() : json_text(value);
    }
  }
  if (const auto it = doc.find("manifest"); it != doc.end() && !it->is_null()) {
    head.manifest_json = json_text(*it);
  }
  return head;
}

} // namespace kcache::protocol
