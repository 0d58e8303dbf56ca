#include <kcache/cachekey/sha256.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/wire.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/decoded_records.h>
#include <kcache/storage/record_signer.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace kcache::storage {

using nlohmann::json;

std::string record_to_json(const ActionRecord& r) {
  json outputs = json::array();
  for (const OutputRef& o : r.outputs) {
    json out{{"name", o.name}, {"digest", o.digest}, {"size", o.size}};
    if (!o.chunks.empty()) {
      json chunks = json::array();
      for (const ChunkRef& c : o.chunks) {
        chunks.push_back({{"digest", c.digest}, {"size", c.size}});
      }
      out["chunks"] = std::move(chunks);
    }
    outputs.push_back(std::move(out));
  }
  json doc{{"key", r.key},           {"outputs", std::move(outputs)},
           {"producer", r.producer}, {"created_ms", r.created_ms},
           {"metadata", r.metadata}, {"namespace", r.ns},
           {"writer", r.writer}};
  if (r.signature) {
    doc["signature"] = protocol::to_json(*r.signature);
  }
  if (r.manifest) {
    doc["manifest"] = json::parse(cachekey::manifest_to_json(*r.manifest));
  }
  return protocol::json_text(doc);
}

Result<ActionRecord> record_from_json(std::string_view text) {
  const json doc = protocol::parse_json_or_discarded(text);
  auto corrupt = [](std::string why) {
    return tl::unexpected(
        StoreError{StoreError::Code::kCorrupt, "action record: " + std::move(why)});
  };
  if (doc.is_discarded() || !doc.is_object()) {
    return corrupt("not a JSON object");
  }
  try {
    ActionRecord r;
    r.key = doc.at("key").get<std::string>();
    if (doc.contains("manifest") && !doc["manifest"].is_null()) {
      auto manifest = cachekey::manifest_from_json(doc["manifest"].dump());
      if (!manifest) {
        return corrupt(manifest.error().message);
      }
      // manifest_from_json has checked that the manifest hashes to its recorded
      // "key"; comparing that string saves hashing it again on every read.
      if (doc["manifest"].value("key", std::string()) != r.key && manifest->key() != r.key) {
        return corrupt("manifest does not hash to the record's key");
      }
      r.manifest = std::move(*manifest);
    }
    for (const json& o : doc.at("outputs")) {
      OutputRef out{o.at("name").get<std::string>(),
                    o.value("digest", std::string()),
                    o.value("size", std::uint64_t{0}),
                    {}};
      if (!protocol::wire::is_valid_cas_key(out.digest)) {
        return corrupt("output '" + out.name + "' has a malformed digest");
      }
      if (const auto chunks = o.find("chunks"); chunks != o.end()) {
        std::uint64_t total = 0;
        for (const json& c : *chunks) {
          ChunkRef chunk{c.at("digest").get<std::string>(), c.at("size").get<std::uint64_t>()};
          if (!protocol::wire::is_valid_cas_key(chunk.digest) || chunk.size > kChunkSize) {
            return corrupt("output '" + out.name + "' has a malformed chunk");
          }
          total += chunk.size;
          out.chunks.push_back(std::move(chunk));
        }
        if (total != out.size) {
          return corrupt("output '" + out.name + "' chunks do not add up to its size");
        }
      }
      r.outputs.push_back(std::move(out));
    }
    r.producer = doc.value("producer", std::string());
    r.created_ms = doc.value("created_ms", std::int64_t{0});
    r.metadata = doc.value("metadata", std::map<std::string, std::string>());
    r.ns = doc.value("namespace", std::string());
    r.writer = doc.value("writer", std::string());
    if (const auto sig = doc.find("signature"); sig != doc.end()) {
      if (auto parsed = protocol::record_signature_from_json(*sig)) {
        r.signature = std::move(*parsed);
      }
    }
    return r;
  } catch (const json::exception& e) {
    return corrupt(e.what());
  }
}

namespace {

ActionRecord new_record(std::string key, std::string producer,
                        std::map<std::string, std::string> metadata, std::string writer) {
  ActionRecord record;
  record.key = std::move(key);
  record.producer = std::move(producer);
  record.metadata = std::move(metadata);
  record.writer = std::move(writer);
  return record;
}

} // namespace

Result<ActionRecord> ArtifactStore::put(const cachekey::KeyManifest& manifest,
                                        std::vector<ArtifactFile> files, std::string producer,
                                        std::map<std::string, std::string> metadata,
                                        std::string writer) {
  ActionRecord record =
      new_record(manifest.key(), std::move(producer), std::move(metadata), std::move(writer));
  record.manifest = manifest;
  return put(std::move(record), std::move(files));
}

Result<ActionRecord> ArtifactStore::put(std::string key, std::vector<ArtifactFile> files,
                                        std::string producer,
                                        std::map<std::string, std::string> metadata,
                                        std::string writer) {
  return put(
      new_record(std::move(key), std::move(producer), std::move(metadata), std::move(writer)),
      std::move(files));
}

Result<ActionRecord> ArtifactStore::put(ActionRecord record, std::vector<ArtifactFile> files) {
  if (!protocol::wire::is_valid_action_key(record.key)) {
    return tl::unexpected(
        StoreError{StoreError::Code::kInvalidArgument, "invalid action key '" + record.key + "'"});
  }
  if (record.manifest && record.manifest->key() != record.key) {
    return tl::unexpected(StoreError{StoreError::Code::kInvalidArgument,
                                     "the manifest does not hash to key '" + record.key + "'"});
  }
  record.outputs.clear();
  // Blobs first: a record must never point at a blob that is not there yet.
  for (ArtifactFile& file : files) {
    std::string digest = cachekey::to_hex(cachekey::Sha256::of(file.data));
    auto chunks = put_blob(store_, digest, file.data);
    if (!chunks) {
      return tl::unexpected(chunks.error());
    }
    record.outputs.push_back(
        OutputRef{std::move(file.name), std::move(digest), file.data.size(), std::move(*chunks)});
  }
  return put_record(std::move(record));
}

ArtifactStore::ArtifactStore(Store& store, const RecordSigner* signer)
    : store_(store), signer_(signer), decoded_(std::make_shared<DecodedRecords>()) {}

Result<ActionRecord> ArtifactStore::put_record(ActionRecord record) {
  if (record.created_ms == 0) {
    record.created_ms = unix_now_ms();
  }
  // A signature that came with the record (a client's, a copied one) is never
  // kept: what is stored is signed by this node or not at all.
  record.signature.reset();
  if (signer_ != nullptr) {
    signer_->sign(record);
  }
  if (auto ok = store_.put(Area::kAction, record.key, record_to_json(record)); !ok) {
    return tl::unexpected(ok.error());
  }
  return record;
}

Result<std::optional<Artifact>> ArtifactStore::load_record(std::string_view key) {
  auto raw = store_.get_shared(Area::kAction, key);
  if (!raw) {
    return tl::unexpected(raw.error());
  }
  if (!raw->has_value()) {
    return std::optional<Artifact>{};
  }
  auto record = decoded_->decode(**raw);
  if (!record || record->key != key) {
    spdlog::warn("action cache: unusable record for {} deleted: {}", key,
                 record ? "stored under another key" : record.error().message);
    (void)store_.remove(Area::kAction, key);
    return std::optional<Artifact>{};
  }
  if (signer_ != nullptr && !signer_->still_trusted(*record)) {
    // Kept, not deleted: trusting the key again brings it back.
    spdlog::debug("action cache: {} is signed by key {}, no longer trusted: a miss", key,
                  record->signature->key_id);
    return std::optional<Artifact>{};
  }
  return std::optional<Artifact>{Artifact{std::move(*record), std::move(**raw), {}}};
}

Result<std::optional<ActionRecord>> ArtifactStore::get_record(std::string_view key) {
  auto loaded = load_record(key);
  if (!loaded || !loaded->has_value()) {
    return loaded ? Result<std::optional<ActionRecord>>(std::optional<ActionRecord>{})
                  : tl::unexpected(loaded.error());
  }
  return std::optional<ActionRecord>{std::move((*loaded)->record)};
}

Result<std::optional<ActionRecord>> ArtifactStore::peek_record(std::string_view key) {
  auto raw = store_.peek(Area::kAction, key);
  if (!raw) {
    return tl::unexpected(raw.error());
  }
  if (!raw->has_value()) {
    return std::optional<ActionRecord>{};
  }
  // Not through decoded_: a listing would push the hot records out of it.
  auto record = record_from_json(**raw);
  if (!record || record->key != key || (signer_ != nullptr && !signer_->still_trusted(*record))) {
    return std::optional<ActionRecord>{}; // get_record() would not serve it either
  }
  return std::optional<ActionRecord>{std::move(*record)};
}

SharedGetResult ArtifactStore::read_chunked(const OutputRef& out) const {
  Bytes data;
  data.reserve(out.size);
  BlobReader blob = reader(out);
  while (true) {
    auto piece = blob.next();
    if (!piece) {
      // A missing or corrupt chunk is a miss, as a missing whole blob is.
      return piece.error().code == StoreError::Code::kCorrupt
                 ? SharedGetResult(std::optional<SharedBytes>{})
                 : tl::unexpected(piece.error());
    }
    if (!piece->has_value()) {
      return std::optional<SharedBytes>{SharedBytes(std::move(data))};
    }
    data.append(**piece);
  }
}

Result<std::optional<Artifact>> ArtifactStore::get(std::string_view key) {
  auto loaded = load_record(key);
  if (!loaded || !loaded->has_value()) {
    return loaded;
  }
  return with_files(std::move(**loaded));
}

Result<std::optional<Artifact>> ArtifactStore::with_files(Artifact artifact) {
  std::vector<std::string> digests; // blobs stored whole, read in one batch
  for (const OutputRef& o : artifact.record.outputs) {
    if (o.chunks.empty()) {
      digests.push_back(o.digest);
    }
  }
  // Shared: a blob in the memory tier is handed out as its buffer, not copied.
  std::vector<SharedGetResult> blobs = store_.get_many_shared(Area::kCas, digests);
  std::size_t next_whole = 0;
  for (const OutputRef& out : artifact.record.outputs) {
    if (!out.chunks.empty()) {
      auto data = read_chunked(out);
      if (!data || !data->has_value()) {
        return data ? std::optional<Artifact>{}
                    : Result<std::optional<Artifact>>(tl::unexpected(data.error()));
      }
      artifact.files.push_back(ArtifactFile{out.name, std::move(**data)});
      continue;
    }
    const std::size_t i = next_whole++;
    if (!blobs[i]) {
      return tl::unexpected(blobs[i].error());
    }
    if (!blobs[i]->has_value()) {
      return std::optional<Artifact>{}; // incomplete: a miss, never a partial artifact
    }
    // Content was bound to its digest when it was read from a persisted tier
    // (FramedStore) or hashed when it was put; the size check catches a record
    // that disagrees with its blob.
    if ((*blobs[i])->size() != out.size) {
      spdlog::warn("CAS blob {} has {} bytes, its record says {}", out.digest, (*blobs[i])->size(),
                   out.size);
      return std::optional<Artifact>{};
    }
    artifact.files.push_back(ArtifactFile{out.name, std::move(**blobs[i])});
  }
  return std::optional<Artifact>{std::move(artifact)};
}

} // namespace kcache::storage
