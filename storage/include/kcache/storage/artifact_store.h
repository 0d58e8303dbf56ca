#pragma once
// Action cache + content-addressed storage over any Store, as in Bazel's
// remote execution API: the action cache maps a key to a record (the key
// manifest, the output files' digests and sizes, who produced them, metadata);
// the CAS maps sha256 -> blob, so identical binaries reached from different
// keys are stored once. Blobs read from persisted tiers are bound to their
// digest by FramedStore; `kcache verify` re-hashes everything. Records are
// signed by the node that stores them (record_signer.h) and verified when
// read from a shared tier (signature_checking_store.h).

#include <kcache/cachekey/key_manifest.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/storage/chunked_blob.h>
#include <kcache/storage/store.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kcache::storage {

struct ArtifactFile {
  std::string name; // "kernel.cubin", "kernel.ptx", "log.txt"
  // Read from the memory tier: its own buffer, shared (store.h), not a copy.
  SharedBytes data;
  friend bool operator==(const ArtifactFile& a, const ArtifactFile& b) {
    return a.name == b.name && a.data == b.data;
  }
};

struct OutputRef {
  std::string name;
  std::string digest; // sha256 hex
  std::uint64_t size = 0;
  // Set for a blob stored as chunks (chunked_blob.h); `digest` is the whole blob's.
  // Not signed: the chunks are checked against `digest`, which is.
  std::vector<ChunkRef> chunks;
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
  // Who stored it, and where (issue 14): set by the storing node and signed.
  std::string ns;     // the key's namespace (contract.md); "" for none
  std::string writer; // the token's name, "anonymous", or a job's submitter
  std::optional<protocol::RecordSignature> signature; // none: an unsigned record
};

struct Artifact {
  ActionRecord record;
  SharedBytes record_json;         // the record as stored (served without re-serializing)
  std::vector<ArtifactFile> files; // in record.outputs order
};

std::string record_to_json(const ActionRecord& record);
// A "signature" member of the wrong shape is dropped here (the record stays
// usable where it is trusted); readers of shared tiers verify it first.
Result<ActionRecord> record_from_json(std::string_view text);

class RecordSigner;
class DecodedRecords;

class ArtifactStore {
public:
  // With a signer, every record stored is signed (record.ns and
  // record.signature are the signer's); without one, stored unsigned.
  explicit ArtifactStore(Store& store, const RecordSigner* signer = nullptr);

  Result<ActionRecord> put(const cachekey::KeyManifest& manifest, std::vector<ArtifactFile> files,
                           std::string producer, std::map<std::string, std::string> metadata = {},
                           std::string writer = {});
  // For keys computed by the client (no kcache manifest).
  Result<ActionRecord> put(std::string key, std::vector<ArtifactFile> files, std::string producer,
                           std::map<std::string, std::string> metadata = {},
                           std::string writer = {});
  // Stores the blobs, then the record (whose outputs are filled in).
  Result<ActionRecord> put(ActionRecord record, std::vector<ArtifactFile> files);
  // Stores a record whose outputs are already in the CAS (PUT /v1/ac), signed.
  Result<ActionRecord> put_record(ActionRecord record);
  // A miss when the record or any of its blobs is missing or fails its digest.
  Result<std::optional<Artifact>> get(std::string_view key);
  Result<std::optional<ActionRecord>> get_record(std::string_view key);
  // The record as get_record() would serve it, read with Store::peek(): no
  // access time, hit, backfill or deletion of an unusable record. For listings.
  Result<std::optional<ActionRecord>> peek_record(std::string_view key);
  // The record alone (files empty), to stream its blobs with reader().
  Result<std::optional<Artifact>> get_head(std::string_view key) { return load_record(key); }
  // get()'s second half: the files of a record from get_head(), read whole.
  Result<std::optional<Artifact>> with_files(Artifact head);
  // Reads one of a record's blobs piece by piece (a chunk at a time when chunked).
  BlobReader reader(const OutputRef& output) const {
    return BlobReader(store_, output.digest, output.size, output.chunks);
  }

private:
  // The record and its stored text, without the blobs.
  Result<std::optional<Artifact>> load_record(std::string_view key);
  // A chunked blob assembled in memory (get(), batch gets); a miss when a chunk is.
  SharedGetResult read_chunked(const OutputRef& output) const;

  Store& store_;
  const RecordSigner* signer_;
  // Records decoded before, by their exact bytes (decoded_records.h): a hit
  // parses no JSON. Shared by copies of this store; the decode is pure.
  std::shared_ptr<DecodedRecords> decoded_;
};

} // namespace kcache::storage
