#include "scopes.h"

#include <kcache/service/key_namespace.h>

namespace kcache::service {

namespace {

std::string refusal(const Principal& who, Role need, std::string_view ns) {
  return "token '" + who.name + "' may not " + (need == Role::kAdmin ? "delete in" : "write to") +
         " namespace '" + std::string(ns) + "' (it needs the " + std::string(role_name(need)) +
         " role there)";
}

// The namespace of a stored kc1- record; nullopt when none is stored.
std::optional<std::string> stored_manifest_ns(storage::ArtifactStore& artifacts,
                                              std::string_view key) {
  auto record = artifacts.get_record(key);
  if (!record || !record->has_value()) {
    return std::nullopt;
  }
  const auto& manifest = (*record)->manifest;
  return manifest ? manifest->ns : std::string();
}

} // namespace

bool may_read_key(const Principal& who, storage::ArtifactStore& artifacts, std::string_view key) {
  if (who.may_everywhere(Role::kRead)) {
    return true;
  }
  const KeyScope scope = key_scope(key);
  switch (scope.kind) {
  case KeyScope::Kind::kCompile:
    return who.may_somewhere(Role::kRead);
  case KeyScope::Kind::kNamed:
    return who.may(Role::kRead, scope.ns);
  case KeyScope::Kind::kManifest:
    break;
  }
  const auto ns = stored_manifest_ns(artifacts, key);
  return !ns || who.may(Role::kRead, *ns);
}

std::optional<std::string> write_refusal(const Principal& who, std::string_view key,
                                         const cachekey::KeyManifest* manifest, Role need) {
  const KeyScope scope = key_scope(key);
  switch (scope.kind) {
  case KeyScope::Kind::kCompile:
    if (who.may_everywhere(Role::kAdmin)) {
      return std::nullopt;
    }
    return "kcc- keys are written by kcached's compile jobs only (token '" + who.name +
           "' would need admin on \"*\")";
  case KeyScope::Kind::kNamed:
    return who.may(need, scope.ns) ? std::nullopt : std::optional(refusal(who, need, scope.ns));
  case KeyScope::Kind::kManifest:
    break;
  }
  // The manifest hashes to the key: its namespace is the key's. One that
  // does not (or none) names no namespace.
  const std::string ns = manifest != nullptr && manifest->key() == key ? manifest->ns : "";
  return who.may(need, ns) ? std::nullopt : std::optional(refusal(who, need, ns));
}

std::optional<std::string> stored_write_refusal(const Principal& who,
                                                storage::ArtifactStore& artifacts,
                                                std::string_view key, Role need) {
  if (key_scope(key).kind != KeyScope::Kind::kManifest) {
    return write_refusal(who, key, nullptr, need);
  }
  const auto ns = stored_manifest_ns(artifacts, key);
  if (!ns) {
    const bool ok = need == Role::kAdmin ? who.may_everywhere(need) : who.may_somewhere(need);
    return ok ? std::nullopt : std::optional(refusal(who, need, ""));
  }
  return who.may(need, *ns) ? std::nullopt : std::optional(refusal(who, need, *ns));
}

} // namespace kcache::service
