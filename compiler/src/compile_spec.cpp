#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/options.h>
#include <kcache/compiler/compile_spec.h>
#include <kcache/protocol/did_you_mean.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>

namespace kcache::compiler {

using nlohmann::json;

namespace {
constexpr std::array<std::pair<Backend, std::string_view>, 4> kBackends = {
    {{Backend::kCuda, "cuda"},
     {Backend::kPtx, "ptx"},
     {Backend::kLlvmIr, "llvm-ir"},
     {Backend::kCpp, "cpp"}}};
constexpr std::array<std::pair<OutputKind, std::string_view>, 4> kOutputs = {
    {{OutputKind::kCubin, "cubin"},
     {OutputKind::kPtx, "ptx"},
     {OutputKind::kObject, "object"},
     {OutputKind::kSharedObject, "shared"}}};
// For messages: the valid values, in the tables' order.
constexpr const char* kBackendNames = "cuda, ptx, llvm-ir, cpp";
constexpr const char* kOutputNames = "cubin, ptx, object, shared";

// A member of the wrong type or a missing one is named with what it should
// be, rather than in nlohmann's words ("type must be string, but is number").
bool all_of_type(const json& list, json::value_t type) {
  return list.is_array() &&
         std::all_of(list.begin(), list.end(), [&](const json& v) { return v.type() == type; });
}

bool is_file(const json& f) {
  return f.is_object() && f.contains("name") && f["name"].is_string() && f.contains("text") &&
         f["text"].is_string();
}

// Every member a spec may have ("autotune": a search over it, read by
// parse_autotune); any other is refused, not dropped.
constexpr std::array<std::string_view, 8> kSpecFields = {
    "backend", "source", "headers", "name_expressions", "options", "target", "output", "autotune"};
constexpr std::array<std::string_view, 2> kFileFields = {"name", "text"};

std::optional<std::string> shape_error(const json& doc) {
  auto wrong = [](std::string_view field, std::string_view should) {
    return "compile spec: '" + std::string(field) + "' must be " + std::string(should);
  };
  if (auto unknown = protocol::unknown_field(doc, kSpecFields, "compile spec")) {
    return unknown;
  }
  if (doc.contains("source")) {
    if (auto unknown =
            protocol::unknown_field(doc["source"], kFileFields, "compile spec: source")) {
      return unknown;
    }
  }
  if (doc.contains("headers") && doc["headers"].is_array()) {
    for (const json& h : doc["headers"]) {
      if (auto unknown = protocol::unknown_field(h, kFileFields, "compile spec: headers[]")) {
        return unknown;
      }
    }
  }
  if (!doc.contains("backend")) {
    return "compile spec: 'backend' is missing (valid: " + std::string(kBackendNames) + ")";
  }
  if (!doc["backend"].is_string()) {
    return wrong("backend", "a string (valid: " + std::string(kBackendNames) + ")");
  }
  if (!doc.contains("source")) {
    return std::string(
        R"(compile spec: 'source' is missing ({"name": "kernel.cu", "text": "..."}))");
  }
  if (!is_file(doc["source"])) {
    return wrong("source", R"({"name": "kernel.cu", "text": "..."} (two strings))");
  }
  if (doc.contains("headers") &&
      !(doc["headers"].is_array() && std::all_of(doc["headers"].begin(), doc["headers"].end(),
                                                 [](const json& h) { return is_file(h); }))) {
    return wrong("headers", R"(a list of {"name": "h.h", "text": "..."})");
  }
  for (const char* field : {"name_expressions", "options"}) {
    if (doc.contains(field) && !all_of_type(doc[field], json::value_t::string)) {
      return wrong(field, "a list of strings");
    }
  }
  if (doc.contains("target") && !doc["target"].is_string()) {
    return wrong("target", R"(a string ("sm_90a", "compute_90", "x86-64-v3", "znver4", ""))");
  }
  if (doc.contains("output") && !doc["output"].is_string()) {
    return wrong("output", "a string (valid: " + std::string(kOutputNames) + ")");
  }
  return std::nullopt;
}
} // namespace

std::string_view backend_name(Backend backend) {
  for (const auto& [b, name] : kBackends) {
    if (b == backend) {
      return name;
    }
  }
  return "unknown";
}

tl::expected<Backend, std::string> parse_backend(std::string_view name) {
  for (const auto& [b, n] : kBackends) {
    if (n == name) {
      return b;
    }
  }
  return tl::unexpected("unknown backend '" + std::string(name) + "' (valid: " + kBackendNames +
                        ")");
}

std::string_view output_name(OutputKind kind) {
  for (const auto& [k, name] : kOutputs) {
    if (k == kind) {
      return name;
    }
  }
  return "unknown";
}

tl::expected<OutputKind, std::string> parse_output(std::string_view name) {
  for (const auto& [k, n] : kOutputs) {
    if (n == name) {
      return k;
    }
  }
  return tl::unexpected("unknown output '" + std::string(name) + "' (valid: " + kOutputNames + ")");
}

std::string spec_to_json(const CompileSpec& spec) {
  auto file = [](const SourceFile& f) { return json{{"name", f.name}, {"text", f.text}}; };
  json headers = json::array();
  for (const SourceFile& h : spec.headers) {
    headers.push_back(file(h));
  }
  return protocol::json_text(json{{"backend", backend_name(spec.backend)},
                                  {"source", file(spec.source)},
                                  {"headers", std::move(headers)},
                                  {"name_expressions", spec.name_expressions},
                                  {"options", spec.options},
                                  {"target", spec.target},
                                  {"output", output_name(spec.output)}});
}

tl::expected<CompileSpec, std::string> spec_from_json(std::string_view text) {
  const json doc = protocol::parse_json_or_discarded(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(std::string("compile spec is not a JSON object"));
  }
  if (auto error = shape_error(doc)) {
    return tl::unexpected(std::move(*error));
  }
  try {
    CompileSpec spec;
    auto backend = parse_backend(doc.at("backend").get<std::string>());
    if (!backend) {
      return tl::unexpected(backend.error());
    }
    spec.backend = *backend;
    spec.source = {doc.at("source").at("name").get<std::string>(),
                   doc.at("source").at("text").get<std::string>()};
    for (const json& h : doc.value("headers", json::array())) {
      spec.headers.push_back({h.at("name").get<std::string>(), h.at("text").get<std::string>()});
    }
    spec.name_expressions = doc.value("name_expressions", std::vector<std::string>());
    spec.options = doc.value("options", std::vector<std::string>());
    spec.target = doc.value("target", std::string());
    auto output = parse_output(doc.value("output", std::string("cubin")));
    if (!output) {
      return tl::unexpected(output.error());
    }
    spec.output = *output;
    return spec;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("compile spec: ") + e.what());
  }
}

namespace {

// The options as the key sees them: the backend's family, canonical, without
// diagnostics. A spec that did not go through prepare_spec() and does not
// parse is keyed verbatim: never a false hit, at worst a needless miss.
void write_options(cachekey::CanonicalWriter& w, const CompileSpec& spec) {
  std::optional<cachekey::FlagFamily> family;
  if (spec.backend == Backend::kCuda) {
    family = cachekey::FlagFamily::kNvrtc;
  } else if (spec.backend == Backend::kCpp) {
    family = cachekey::FlagFamily::kClang;
  }
  if (family) {
    if (auto normalized = cachekey::normalize_options(*family, spec.options)) {
      w.str("parsed").digest(cachekey::options_digest(*normalized));
      return;
    }
  }
  w.str("verbatim").digest(cachekey::options_digest(spec.options));
}

} // namespace

cachekey::Digest compile_key(const CompileSpec& spec,
                             const cachekey::ToolchainFingerprint& toolchain) {
  cachekey::CanonicalWriter w;
  w.tag(kCompileKeySchema)
      .str(backend_name(spec.backend))
      .str(spec.source.name)
      .str(spec.source.text);
  w.list(spec.headers.size());
  for (const SourceFile& h : spec.headers) {
    w.str(h.name).str(h.text);
  }
  w.list(spec.name_expressions.size());
  for (const std::string& e : spec.name_expressions) {
    w.str(e);
  }
  write_options(w, spec);
  w.str(spec.target).str(output_name(spec.output)).digest(toolchain.digest());
  return w.sha256();
}

} // namespace kcache::compiler
