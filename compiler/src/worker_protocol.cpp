#include <kcache/compiler/worker_protocol.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>

#include <nlohmann/json.hpp>

#include <array>

namespace kcache::compiler {

using nlohmann::json;
namespace wire = protocol::wire;

namespace {
constexpr std::array<std::pair<CompileError::Code, std::string_view>, 6> kCodes = {
    {{CompileError::Code::kInvalidSpec, "invalid-spec"},
     {CompileError::Code::kCompileFailed, "compile-failed"},
     {CompileError::Code::kUnavailable, "unavailable"},
     {CompileError::Code::kInternal, "internal"},
     {CompileError::Code::kCancelled, "cancelled"},
     {CompileError::Code::kResourceLimit, "resource-limit"}}};
} // namespace

std::string_view error_code_name(CompileError::Code code) {
  for (const auto& [c, name] : kCodes) {
    if (c == code) {
      return name;
    }
  }
  return "internal";
}

std::string encode_worker_outcome(const CompileOutcome& outcome,
                                  const cachekey::ToolchainFingerprint& toolchain) {
  json head{{"ok", outcome.has_value()}, {"toolchain", toolchain.components()}};
  std::string binary, log;
  if (outcome) {
    head["kind"] = output_name(outcome->kind);
    head["lowered_names"] = outcome->lowered_names;
    head["duration_us"] = outcome->duration.count();
    binary = outcome->binary;
    log = outcome->log;
  } else {
    head["code"] = error_code_name(outcome.error().code);
    head["message"] = outcome.error().message;
    log = outcome.error().log;
  }
  return wire::encode_parts(
      {{"outcome", protocol::json_text(head)}, {"binary", binary}, {"log", log}});
}

std::string_view worker_exit_name(WorkerExit exit) {
  switch (exit) {
  case WorkerExit::kCompleted:
    return "completed";
  case WorkerExit::kCompileError:
    return "compile-error";
  case WorkerExit::kInternalError:
    return "internal-error";
  case WorkerExit::kTimedOut:
    return "timed-out";
  case WorkerExit::kMemoryLimit:
    return "memory-limit";
  case WorkerExit::kKilledBySignal:
    return "killed-by-signal";
  case WorkerExit::kProtocolError:
    return "protocol-error";
  case WorkerExit::kSpawnFailed:
    return "spawn-failed";
  case WorkerExit::kExecFailed:
    return "exec-failed";
  case WorkerExit::kCancelled:
    return "cancelled";
  }
  return "unknown";
}

WorkerOutcome decode_worker_outcome(std::string_view bytes) {
  auto internal = [](std::string message) {
    return WorkerOutcome{
        tl::unexpected(CompileError{CompileError::Code::kInternal, std::move(message), {}}),
        {},
        WorkerExit::kProtocolError};
  };
  auto parts = wire::decode_parts(bytes);
  if (!parts || parts->size() != 3 || (*parts)[0].name != "outcome") {
    return internal("kcache-worker sent a malformed reply");
  }
  const json head = protocol::parse_json_or_discarded((*parts)[0].data);
  if (!head.is_object() || !head.contains("ok")) {
    return internal("kcache-worker sent a malformed outcome");
  }
  WorkerOutcome out{tl::unexpected(CompileError{}), {}, WorkerExit::kCompleted};
  try {
    out.toolchain = head.value("toolchain", std::map<std::string, std::string>());
    if (head["ok"].get<bool>()) {
      CompileResult r;
      const std::string kind = head.value("kind", std::string("cubin"));
      r.kind = parse_output(kind).value_or(OutputKind::kCubin);
      r.lowered_names = head.value("lowered_names", std::map<std::string, std::string>());
      r.duration =
          std::chrono::microseconds(protocol::json_integer(head, "duration_us", std::int64_t{0}));
      r.binary = std::move((*parts)[1].data);
      r.log = std::move((*parts)[2].data);
      out.outcome = std::move(r);
    } else {
      CompileError e;
      const std::string code = head.value("code", std::string("internal"));
      for (const auto& [c, name] : kCodes) {
        if (name == code) {
          e.code = c;
        }
      }
      e.message = head.value("message", std::string());
      e.log = std::move((*parts)[2].data);
      out.exit = e.code == CompileError::Code::kInternal ? WorkerExit::kInternalError
                                                         : WorkerExit::kCompileError;
      out.outcome = tl::unexpected(std::move(e));
    }
  } catch (const json::exception& e) {
    return internal(std::string("kcache-worker outcome: ") + e.what());
  }
  return out;
}

} // namespace kcache::compiler

namespace kcache::compiler {

std::string encode_toolchains(const Toolchains& toolchains) {
  json out = json::object();
  for (const auto& [backend, fingerprint] : toolchains) {
    out[std::string(backend_name(backend))] = fingerprint.components();
  }
  return protocol::json_text(out);
}

std::string encode_host_target(const HostTarget& host) {
  return json{{"cpu", host.cpu}, {"features", host.features}}.dump();
}

tl::expected<HostTarget, std::string> decode_host_target(std::string_view text) {
  const json in = protocol::parse_json_or_discarded(text);
  if (!in.is_object() || !in.contains("cpu") || !in["cpu"].is_string() ||
      !in.contains("features") || !in["features"].is_string() ||
      in["cpu"].get<std::string>().empty()) {
    return tl::unexpected(std::string("host target is not {\"cpu\": ..., \"features\": ...}"));
  }
  return HostTarget{in["cpu"].get<std::string>(), in["features"].get<std::string>()};
}

tl::expected<Toolchains, std::string> decode_toolchains(std::string_view text) {
  const json in = protocol::parse_json_or_discarded(text);
  if (!in.is_object()) {
    return tl::unexpected(std::string("toolchain list is not a JSON object"));
  }
  Toolchains out;
  for (const auto& [name, components] : in.items()) {
    auto backend = parse_backend(name);
    if (!backend || !components.is_object()) {
      return tl::unexpected("toolchain list: bad entry '" + name + "'");
    }
    cachekey::ToolchainFingerprint fingerprint;
    for (const auto& [component, version] : components.items()) {
      if (!version.is_string()) {
        return tl::unexpected("toolchain list: bad version of " + component);
      }
      fingerprint.add(component, version.get<std::string>());
    }
    out.emplace(*backend, std::move(fingerprint));
  }
  return out;
}

} // namespace kcache::compiler
