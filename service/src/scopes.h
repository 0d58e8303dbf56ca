#pragma once
// The namespace checks the route handlers make (contract: a token's role in
// the namespace of the key it touches; key_namespace.h says which that is).
// Reads a token may not make answer 404, as a miss would: whether a key
// exists in a namespace is itself not the token's to know.

#include <kcache/cachekey/key_manifest.h>
#include <kcache/service/config.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/artifact_store.h>

#include <optional>
#include <string>
#include <string_view>

namespace kcache::service {

// Whether `who` may read `key`: kcc- keys any reader; named keys by their
// namespace; kc1- keys by the stored record's manifest (one record read,
// skipped for a token that reads every namespace; nothing stored: true, the
// read is a miss anyway).
bool may_read_key(const Principal& who, storage::ArtifactStore& artifacts, std::string_view key);

// Why `who` may not store `key` with `need` (write, or admin for deletes),
// or nullopt when it may. A kc1- key's namespace is `manifest`'s when it
// hashes to the key, else "" (only a "*" grant covers it); kcc- keys are
// the service's: admin on "*" only.
std::optional<std::string> write_refusal(const Principal& who, std::string_view key,
                                         const cachekey::KeyManifest* manifest,
                                         Role need = Role::kWrite);

// As write_refusal, with a kc1- key's namespace read from its stored record
// (deletes and leases carry no manifest). Not stored: leases need write
// somewhere (the put that follows is checked), deletes admin on "*".
std::optional<std::string> stored_write_refusal(const Principal& who,
                                                storage::ArtifactStore& artifacts,
                                                std::string_view key, Role need);

} // namespace kcache::service
