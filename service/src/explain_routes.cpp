// GET /v1/explain?a=KEY&b=KEY: why two stored keys differ, side by side (the
// dashboard's explain). The comparison is the CLI's `kcache explain`
// (cachekey/explain.h, or hash_details.h for clients that hash their own
// keys), made here from the stored records, which are peeked: looking is not using.

#include "responses.h"
#include "scopes.h"

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/hash_details.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/request_handler.h>

#include <algorithm>
#include <array>

namespace kcache::service {

using nlohmann::json;

namespace {

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    out.append(out.empty() ? "" : separator).append(item);
  }
  return out;
}

// A manifest's components as explain() names them, each as text.
std::vector<std::pair<std::string, std::string>> components(const cachekey::KeyManifest& m) {
  std::vector<std::string> toolchain;
  for (const auto& [name, value] : m.toolchain) {
    toolchain.push_back(name);
    toolchain.back().append(" = ").append(value);
  }
  std::string graph = m.graph_digest;
  if (!m.graph_nodes.empty()) {
    graph += " (" + std::to_string(m.graph_nodes.size()) + " nodes)";
  }
  return {{"schema_version", std::to_string(m.schema_version)},
          {"namespace", m.ns},
          {"graph", graph},
          {"guards", joined(m.guards, "\n")},
          {"hardware_class", m.hardware_class},
          {"toolchain", joined(toolchain, "\n")},
          {"options", joined(m.options, " ")},
          {"salt", m.salt}};
}

// The "hash_details" metadata kcache.torch stores: one line per key input.
std::vector<cachekey::HashDetail> hash_details(const storage::ActionRecord& record) {
  std::vector<std::string> lines;
  const auto it = record.metadata.find("hash_details");
  if (it != record.metadata.end()) {
    const json parsed = protocol::parse_json_or_discarded(it->second);
    if (parsed.is_array()) {
      for (const json& line : parsed) {
        if (line.is_string()) {
          lines.push_back(line.get<std::string>());
        }
      }
    }
  }
  return cachekey::parse_hash_details(lines);
}

std::string detail_text(const cachekey::HashDetail* d) {
  if (d == nullptr) {
    return "(absent)";
  }
  return d->hash.empty() ? d->value : "[" + d->hash + "] " + d->value;
}

const cachekey::HashDetail* find_detail(const std::vector<cachekey::HashDetail>& details,
                                        const std::string& field) {
  const auto it = std::find_if(details.begin(), details.end(),
                               [&](const cachekey::HashDetail& d) { return d.field == field; });
  return it == details.end() ? nullptr : &*it;
}

json diffs_json(const cachekey::Explanation& e) {
  json out = json::array();
  for (const cachekey::ComponentDiff& d : e.diffs) {
    out.push_back({{"component", d.component}, {"a", d.a}, {"b", d.b}, {"details", d.details}});
  }
  return out;
}

bool differs(const cachekey::Explanation& e, const std::string& component) {
  return std::any_of(e.diffs.begin(), e.diffs.end(),
                     [&](const cachekey::ComponentDiff& d) { return d.component == component; });
}

} // namespace

Response RequestHandler::explain_keys(const Request& req, const RouteArgs& args) {
  const std::array<std::string, 2> keys = {args.query.get("a"), args.query.get("b")};
  std::vector<storage::ActionRecord> records;
  for (const std::string& key : keys) {
    if (!protocol::wire::is_valid_action_key(key)) {
      return error(req, http::status::bad_request,
                   "give two action keys: /v1/explain?a=KEY&b=KEY ('" + key.substr(0, 80) +
                       "' is not one)");
    }
    // A key the token may not read is as absent as a missing one.
    const auto absent = [&] {
      return error(req, http::status::not_found, "no action record for " + key);
    };
    if (!may_read_key(args.who, artifacts_, key)) {
      return absent();
    }
    auto record = artifacts_.peek_record(key);
    if (!record) {
      return store_error(req, record.error());
    }
    if (!record->has_value()) {
      return absent();
    }
    records.push_back(std::move(**record));
  }
  json rows = json::array();
  json body;
  if (records[0].manifest && records[1].manifest) {
    const cachekey::Explanation e = cachekey::explain(*records[0].manifest, *records[1].manifest);
    const auto a = components(*records[0].manifest);
    const auto b = components(*records[1].manifest);
    for (std::size_t i = 0; i < a.size(); ++i) {
      rows.push_back({{"component", a[i].first},
                      {"a", a[i].second},
                      {"b", b[i].second},
                      {"differs", differs(e, a[i].first)}});
    }
    body = {{"kind", "manifest"}, {"diffs", diffs_json(e)}};
  } else {
    const auto a = hash_details(records[0]);
    const auto b = hash_details(records[1]);
    if (a.empty() || b.empty()) {
      return error(req, http::status::unprocessable_entity,
                   (a.empty() ? keys[0] : keys[1]) +
                       " was stored without a key manifest or hash details; nothing to compare");
    }
    const cachekey::Explanation e = cachekey::explain_hash_details(keys[0], a, keys[1], b);
    for (const cachekey::HashDetail& d : a) {
      rows.push_back({{"component", d.field},
                      {"a", detail_text(&d)},
                      {"b", detail_text(find_detail(b, d.field))},
                      {"differs", differs(e, d.field)}});
    }
    for (const cachekey::HashDetail& d : b) {
      if (find_detail(a, d.field) == nullptr) {
        rows.push_back({{"component", d.field},
                        {"a", detail_text(nullptr)},
                        {"b", detail_text(&d)},
                        {"differs", true}});
      }
    }
    body = {{"kind", "hash_details"}, {"diffs", diffs_json(e)}};
  }
  body["key_a"] = keys[0];
  body["key_b"] = keys[1];
  body["same"] = body["diffs"].empty();
  body["components"] = std::move(rows);
  return json_response(req, http::status::ok, body);
}

} // namespace kcache::service
