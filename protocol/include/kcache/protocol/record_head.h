#pragma once
// The "record" part of an artifact upload (PUT /v1/artifacts/{key}): who
// produced it, free-form metadata and the key manifest. Clients write it with
// to_json; kcached and the C ABI read it with record_head_from_json.

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <map>
#include <string>

namespace kcache::protocol {

struct RecordHead {
  std::string producer;
  std::map<std::string, std::string> metadata;
  std::string manifest_json; // a kcache key manifest (JSON text); must hash to the key; empty: none
};

// Fails only when manifest_json is not JSON.
tl::expected<nlohmann::json, std::string> to_json(const RecordHead& head);

// {"producer": "...", "metadata": {...}, "manifest": {...}}, each optional
// (null is absent); metadata values that are not strings keep their JSON text.
tl::expected<RecordHead, std::string> record_head_from_json(const nlohmann::json& doc);

} // namespace kcache::protocol
