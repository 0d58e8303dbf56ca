#include <kcache/compiler/bench_protocol.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>

#include <nlohmann/json.hpp>

namespace kcache::compiler {

using nlohmann::json;
namespace wire = protocol::wire;

namespace {

json variant_json(const BenchVariant& v) {
  return json{{"id", v.id}, {"params", v.params}};
}

} // namespace

std::string encode_bench_request(const BenchRequest& request) {
  json variants = json::array();
  for (const BenchVariant& v : request.variants) {
    variants.push_back(variant_json(v));
  }
  const json head{{"search", protocol::parse_json_or_discarded(request.search_json)},
                  {"device", request.device},
                  {"entry", request.entry},
                  {"reference", variant_json(request.reference)},
                  {"check", request.check},
                  {"variants", std::move(variants)}};
  std::vector<wire::Part> parts = {{"request", protocol::json_text(head)},
                                   {request.reference.id, request.reference.binary}};
  for (const BenchVariant& v : request.variants) {
    parts.push_back({v.id, v.binary});
  }
  return wire::encode_parts(parts);
}

std::string frame_bench_request(const BenchRequest& request) {
  std::string body = encode_bench_request(request);
  return std::to_string(body.size()) + "\n" + body;
}

void write_bench_result(std::FILE* out, const BenchResult& result) {
  const std::string line = encode_bench_result(result) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

tl::expected<BenchRequest, std::string> decode_bench_request(std::string_view body) {
  auto parts = wire::decode_parts(body);
  if (!parts || parts->empty() || (*parts)[0].name != "request") {
    return tl::unexpected(std::string("bench request: malformed parts body"));
  }
  const json head = protocol::parse_json_or_discarded((*parts)[0].data);
  if (!head.is_object()) {
    return tl::unexpected(std::string("bench request: the head is not a JSON object"));
  }
  std::map<std::string, std::string> binaries;
  for (std::size_t i = 1; i < parts->size(); ++i) {
    binaries[(*parts)[i].name] = std::move((*parts)[i].data);
  }
  try {
    BenchRequest r;
    r.search_json = head.at("search").dump();
    r.device = head.value("device", std::string("cpu"));
    r.entry = head.at("entry").get<std::string>();
    r.check = head.value("check", true);
    auto variant = [&](const json& v) -> tl::expected<BenchVariant, std::string> {
      BenchVariant out;
      out.id = v.at("id").get<std::string>();
      for (const auto& [name, value] : v.at("params").items()) {
        out.params[name] = protocol::json_integer<std::int64_t>(value);
      }
      const auto binary = binaries.find(out.id);
      if (binary == binaries.end()) {
        return tl::unexpected("bench request: no binary for variant " + out.id);
      }
      out.binary = binary->second;
      return out;
    };
    auto reference = variant(head.at("reference"));
    if (!reference) {
      return tl::unexpected(reference.error());
    }
    r.reference = std::move(*reference);
    for (const json& v : head.at("variants")) {
      auto parsed = variant(v);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      r.variants.push_back(std::move(*parsed));
    }
    return r;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("bench request: ") + e.what());
  }
}

std::string encode_bench_result(const BenchResult& r) {
  json out{{"id", r.id},
           {"status", r.status},
           {"median_us", r.median_us},
           {"min_us", r.min_us},
           {"max_error", r.max_error}};
  if (!r.error.empty()) {
    out["error"] = r.error;
  }
  return protocol::json_text(out);
}

tl::expected<BenchResult, std::string> decode_bench_result(std::string_view line) {
  const json in = protocol::parse_json_or_discarded(line);
  if (!in.is_object()) {
    return tl::unexpected(std::string("bench result is not a JSON object"));
  }
  try {
    BenchResult r;
    r.id = in.at("id").get<std::string>();
    r.status = in.at("status").get<std::string>();
    r.median_us = in.value("median_us", 0.0);
    r.min_us = in.value("min_us", 0.0);
    r.max_error = in.value("max_error", 0.0);
    r.error = in.value("error", std::string());
    return r;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("bench result: ") + e.what());
  }
}

} // namespace kcache::compiler
