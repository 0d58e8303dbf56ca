#pragma once
// Action cache + content-addressed storage over any Store, as in Bazel's
// remote execution API: the action cache maps a key to a record (the key
// manifest, the output files' digests and sizes, who produced them, metadata);
// the CAS maps sha256 -> blob, so identical binaries reached from different
// keys are stored once. Blobs read from persisted tiers are bound to their
// digest by FramedStore; `kcache verify` re-hashes everything.

#include <kcache/cachekey/key_manifest.h>
#include <kcache/storage/store.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kcache::storage {

struct ArtifactFile {
  std::string name; // "kernel.cubin", "kernel.ptx", "log.txt"
  Bytes data;
};

struct OutputRef {
  std::string name;
  std::string digest; // sha256 hex
  std::uint64_t size = 0;
  friend bool operator==(const OutputRef&, const OutputRef&) = default;
};

struct ActionRecord {
  std::string key;
  // kcache's own keys carry their manifest (it must hash to `key`); clients
  // that key with their own hash (Inductor's FX keys) store none.
  std::optional<cachekey::KeyManifest> manifest;
  std::vector<OutputRef> outputs;
  std::string producer; // "kcache-worker@host", "torch-rank-0"
  std::int64_t created_ms = 0;
  std::map<std::string, std::string> metadata; // timings, compile log summary...
};

struct Artifact {
  ActionRecord record;
  std::string record_json;         // the record as stored (served without re-serializing)
  std::vector<ArtifactFile> files; // in record.outputs order
};

std::string record_to_json(const ActionRecord& record);
Result<ActionRecord> record_from_json(std::string_view text);

class ArtifactStore {
public:
  explicit ArtifactStore(Store& store) : store_(store) {}

  Result<ActionRecord> put(const cachekey::KeyManifest& manifest, std::vector<ArtifactFile> files,
                           std::string producer, std::map<std::string, std::string> metadata = {});
  // For keys computed by the client (no kcache manifest).
  Result<ActionRecord> put(std::string key, std::vector<ArtifactFile> files, std::string producer,
                           std::map<std::string, std::string> metadata = {});
  // Stores the blobs, then the record (whose outputs are filled in).
  Result<ActionRecord> put(ActionRecord record, std::vector<ArtifactFile> files);
  // A miss when the record or any of its blobs is missing or fails its digest.
  Result<std::optional<Artifact>> get(std::string_view key);
  Result<std::optional<ActionRecord>> get_record(std::string_view key);

private:
  // The record and its stored text, without the blobs.
  Result<std::optional<Artifact>> load_record(std::string_view key);

  Store& store_;
};

} // namespace kcache::storage
