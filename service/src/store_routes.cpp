// The storage routes of RequestHandler: action records, CAS blobs, artifacts
// (record + files in one body) and batch gets.

#include "artifact_body.h"
#include "responses.h"
#include "scopes.h"
#include "spooled_parts.h"
#include "upload_spool.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_head.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/request_handler.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kcache::service {

namespace wire = protocol::wire;
using nlohmann::json;
using storage::Area;

namespace {

Response forbidden(const Request& req, std::string message) {
  return error(req, http::status::forbidden, std::move(message));
}

Response head_response(const Request& req, bool found) {
  Response res{found ? http::status::ok : http::status::not_found, req.version()};
  res.set(http::field::server, "kcached");
  res.keep_alive(req.keep_alive());
  res.content_length(0);
  return res;
}

// The files' bytes: an artifact hit's payload.
std::uint64_t payload_of(const storage::Artifact& artifact) {
  std::uint64_t files = 0;
  for (const storage::ArtifactFile& f : artifact.files) {
    files += f.data.size();
  }
  return files;
}

// The size of the artifact's parts body (wire.h: the record, then its files).
std::uint64_t encoded_size(const storage::Artifact& artifact) {
  std::uint64_t total =
      wire::kPartsPrefixSize + wire::part_head_size("record") + artifact.record_json.size();
  for (const storage::ArtifactFile& f : artifact.files) {
    total += wire::part_head_size(f.name) + f.data.size();
  }
  return total;
}

// Appends the artifact's parts body, written straight from the store's
// values: each file is copied once, into `out`.
void append_artifact(std::string& out, const storage::Artifact& artifact) {
  out += wire::encode_parts_prefix(artifact.files.size() + 1);
  out += wire::encode_part_head("record", artifact.record_json.size());
  out += artifact.record_json.view();
  for (const storage::ArtifactFile& f : artifact.files) {
    out += wire::encode_part_head(f.name, f.data.size());
    out += f.data.view();
  }
}

// A hit read whole: large files go out from the store's buffers in one
// gathered write (artifact_body.h; no copy), small artifacts as one encoded
// string (a copy of a few KiB costs less than the pieces).
Response artifact_response(const Request& req, storage::Artifact artifact, HitCopies& copies) {
  const std::uint64_t files = payload_of(artifact);
  if (files < GatheredBody::kGatherBytes) {
    std::string body;
    body.reserve(encoded_size(artifact));
    append_artifact(body, artifact);
    copies.count(files, files);
    return make(req, http::status::ok, std::move(body), wire::kPartsContentType);
  }
  copies.count(files, 0);
  Response res = make(req, http::status::ok, std::string(), wire::kPartsContentType);
  res.body().source = std::make_shared<GatheredBody>(std::move(artifact));
  res.prepare_payload();
  return res;
}

// An artifact with a file stored as chunks is streamed from the store
// (artifact_body.h); nullopt: read it whole, as before. A missing piece is a
// miss here, before the 200 is sent.
std::optional<Response> streamed_artifact(const Request& req,
                                          const storage::ArtifactStore& artifacts,
                                          storage::Artifact& head) {
  const auto& outputs = head.record.outputs;
  if (std::none_of(outputs.begin(), outputs.end(),
                   [](const storage::OutputRef& o) { return !o.chunks.empty(); })) {
    return std::nullopt;
  }
  for (const storage::OutputRef& out : outputs) {
    auto present = artifacts.reader(out).present();
    if (!present) {
      return store_error(req, present.error());
    }
    if (!*present) {
      return error(req, http::status::not_found, "no artifact for " + head.record.key);
    }
  }
  Response res = make(req, http::status::ok, std::string(), wire::kPartsContentType);
  res.body().source = std::make_shared<ArtifactBody>(artifacts, std::move(head));
  res.prepare_payload();
  return res;
}

// A CAS blob stored as chunks (an upload spooled to disk) is found by its
// whole digest through this record in the action area: one output, the blob,
// with its chunk list. Being a record, it keeps the chunks alive as any
// record keeps its blobs, and it is signed like one.
std::string cas_index_key(std::string_view digest) {
  return "kcas-" + std::string(digest);
}

// The chunked blob `digest` names, when an index record lists it.
storage::Result<std::optional<storage::OutputRef>>
chunked_cas_blob(storage::ArtifactStore& artifacts, std::string_view digest) {
  auto index = artifacts.get_record(cas_index_key(digest));
  if (!index) {
    return tl::unexpected(index.error());
  }
  if (!index->has_value() || (*index)->outputs.size() != 1 ||
      (*index)->outputs.front().digest != digest || (*index)->outputs.front().chunks.empty()) {
    return std::optional<storage::OutputRef>();
  }
  return std::move((*index)->outputs.front());
}

// Stores a spooled upload a chunk at a time: memory holds one chunk, never
// the blob. The bytes are hashed again as they are read back, so what is
// stored is what was checked against the URL on arrival.
Response put_spooled_blob(const Request& req, storage::Store& store,
                          storage::ArtifactStore& artifacts, std::string_view digest,
                          BodySource& spool, const std::string& writer) {
  storage::OutputRef blob{"blob", std::string(digest), spool.size(), {}};
  cachekey::Sha256 again;
  std::string whole; // a blob small enough to be stored whole (a short chunked upload)
  while (true) {
    auto piece = spool.next();
    if (!piece) {
      return error(req, http::status::internal_server_error, piece.error());
    }
    if (piece->empty()) {
      break;
    }
    again.update(*piece);
    if (blob.size <= storage::kChunkThreshold) {
      whole.append(*piece);
      continue;
    }
    auto chunk = storage::put_chunk(store, *piece);
    if (!chunk) {
      return store_error(req, chunk.error());
    }
    blob.chunks.push_back(std::move(*chunk));
  }
  if (cachekey::to_hex(again.finish()) != digest) {
    return error(req, http::status::internal_server_error,
                 "the upload spool changed on disk before it was stored");
  }
  if (blob.chunks.empty()) {
    if (auto ok = store.put(Area::kCas, digest, whole); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::created, json{{"digest", digest}});
  }
  storage::ActionRecord index;
  index.key = cas_index_key(digest);
  index.outputs.push_back(std::move(blob));
  index.producer = "kcached";
  index.writer = writer;
  if (auto ok = artifacts.put_record(std::move(index)); !ok) {
    return store_error(req, ok.error());
  }
  return json_response(req, http::status::created, json{{"digest", digest}});
}

// The record an artifact upload's record part describes, for `key` and its
// writer; or the answer refusing it (400, 403).
tl::expected<storage::ActionRecord, Response> uploaded_record(const Request& req,
                                                              std::string_view key,
                                                              const Principal& who,
                                                              std::string_view text) {
  const json doc = protocol::parse_json_or_discarded(text);
  if (doc.is_discarded() || !doc.is_object()) {
    return tl::unexpected(
        error(req, http::status::bad_request, "the record part is not a JSON object"));
  }
  auto head = protocol::record_head_from_json(doc);
  if (!head) {
    return tl::unexpected(
        error(req, http::status::bad_request, "the record part: " + head.error()));
  }
  storage::ActionRecord record;
  record.key = std::string(key);
  record.writer = who.name;
  record.producer = std::move(head->producer);
  record.metadata = std::move(head->metadata);
  if (!head->manifest_json.empty()) {
    auto manifest = cachekey::manifest_from_json(head->manifest_json);
    if (!manifest) {
      return tl::unexpected(error(req, http::status::bad_request, manifest.error().message));
    }
    record.manifest = std::move(*manifest);
  }
  if (auto refused = write_refusal(who, key, record.manifest ? &*record.manifest : nullptr)) {
    return tl::unexpected(forbidden(req, std::move(*refused)));
  }
  return record;
}

// PUT /v1/artifacts of a body spooled to disk (spooled_parts.h): the framing
// is checked and the record refused or accepted before any file is stored;
// then each file is stored a chunk at a time from the spool, and the record
// last (a record never names a blob that is not there yet).
Response put_spooled_artifact(const Request& req, storage::Store& store,
                              storage::ArtifactStore& artifacts, std::string_view key,
                              const Principal& who, UploadSpool& spool) {
  auto parts = index_spooled_parts(spool);
  if (!parts) {
    return error(req,
                 parts.error().malformed ? http::status::bad_request
                                         : http::status::internal_server_error,
                 parts.error().message);
  }
  if (parts->empty() || parts->front().name != "record") {
    return error(req, http::status::bad_request, "the first part must be the \"record\"");
  }
  if (parts->front().size > kMaxSpooledRecordPart) {
    return error(req, http::status::bad_request,
                 "the record part is over " + std::to_string(kMaxSpooledRecordPart) + " bytes");
  }
  auto text = spool.read_at(parts->front().offset, parts->front().size);
  if (!text) {
    return error(req, http::status::internal_server_error, text.error());
  }
  auto record = uploaded_record(req, key, who, *text);
  if (!record) {
    return std::move(record.error());
  }
  if (record->manifest && record->manifest->key() != record->key) {
    return error(req, http::status::bad_request,
                 "the manifest does not hash to key '" + record->key + "'");
  }
  for (std::size_t i = 1; i < parts->size(); ++i) {
    auto out = store_spooled_part(store, spool, (*parts)[i]);
    if (!out) {
      return store_error(req, out.error());
    }
    record->outputs.push_back(std::move(*out));
  }
  auto stored = artifacts.put_record(std::move(*record));
  if (!stored) {
    return store_error(req, stored.error());
  }
  return make(req, http::status::created, storage::record_to_json(*stored), wire::kJsonContentType);
}

} // namespace

Response RequestHandler::action(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request,
                 "invalid action key (1-512 characters of [A-Za-z0-9._:+=-])");
  }
  // A namespace this token may not read answers as a miss would.
  const bool readable = may_read_key(args.who, artifacts_, key);
  switch (req.method()) {
  case http::verb::head: {
    if (!readable) {
      return head_response(req, false);
    }
    // The same read as GET (not the store's contains()): a record GET would
    // refuse (signed by a revoked key in a local tier, stored under another
    // key, refused by a checked tier) is absent for HEAD too.
    auto record = artifacts_.get_record(key);
    return record ? head_response(req, record->has_value()) : store_error(req, record.error());
  }
  case http::verb::get: {
    if (!readable) {
      return error(req, http::status::not_found, "no action record for " + std::string(key));
    }
    auto record = artifacts_.get_record(key);
    if (!record) {
      return store_error(req, record.error());
    }
    if (!record->has_value()) {
      return error(req, http::status::not_found, "no action record for " + std::string(key));
    }
    return make(req, http::status::ok, storage::record_to_json(**record), wire::kJsonContentType);
  }
  case http::verb::put: {
    auto record = storage::record_from_json(req.body());
    if (!record) {
      return error(req, http::status::bad_request, record.error().message);
    }
    if (record->key != key) {
      return error(req, http::status::bad_request, "the record's key differs from the URL's");
    }
    if (auto refused =
            write_refusal(args.who, key, record->manifest ? &*record->manifest : nullptr)) {
      return forbidden(req, std::move(*refused));
    }
    json missing = json::array();
    for (const storage::OutputRef& out : record->outputs) {
      auto present = artifacts_.reader(out).present(); // a chunked blob: all its chunks
      if (!present) {
        return store_error(req, present.error());
      }
      if (!*present) {
        missing.push_back(out.digest);
      }
    }
    if (!missing.empty()) {
      // As in Bazel's REAPI: an action result may only name blobs that exist.
      return json_response(req, http::status::conflict,
                           json{{"error", "the record names blobs missing from the CAS"},
                                {"missing", std::move(missing)}});
    }
    record->writer = args.who.name; // signed: this node vouches for who stored it
    if (auto ok = artifacts_.put_record(std::move(*record)); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::created, json{{"key", key}});
  }
  default: { // DELETE
    if (!readable) {
      return error(req, http::status::not_found, "no action record for " + std::string(key));
    }
    if (auto refused = stored_write_refusal(args.who, artifacts_, key, Role::kAdmin)) {
      return forbidden(req, std::move(*refused));
    }
    if (auto ok = store_.remove(Area::kAction, key); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::ok, json{{"deleted", key}});
  }
  }
}

Response RequestHandler::cas(const Request& req, const RouteArgs& args) {
  const std::string_view digest = args.param;
  if (!wire::is_valid_cas_key(digest)) {
    return error(req, http::status::bad_request, "a CAS key is 64 lowercase hex digits (sha256)");
  }
  switch (req.method()) {
  case http::verb::head: {
    auto found = store_.contains(Area::kCas, digest);
    if (!found) {
      return store_error(req, found.error());
    }
    if (*found) {
      return head_response(req, true);
    }
    auto chunked = chunked_cas_blob(artifacts_, digest);
    if (!chunked) {
      return store_error(req, chunked.error());
    }
    if (!chunked->has_value()) {
      return head_response(req, false);
    }
    auto present = artifacts_.reader(**chunked).present();
    return present ? head_response(req, *present) : store_error(req, present.error());
  }
  case http::verb::get: {
    auto blob = store_.get(Area::kCas, digest);
    if (!blob) {
      return store_error(req, blob.error());
    }
    if (blob->has_value()) {
      return make(req, http::status::ok, std::move(**blob), wire::kBytesContentType);
    }
    // Stored as chunks: streamed a chunk at a time, as entry reads are.
    auto chunked = chunked_cas_blob(artifacts_, digest);
    if (!chunked) {
      return store_error(req, chunked.error());
    }
    if (chunked->has_value()) {
      storage::BlobReader reader = artifacts_.reader(**chunked);
      auto present = reader.present();
      if (!present) {
        return store_error(req, present.error());
      }
      if (*present) {
        Response res = make(req, http::status::ok, std::string(), wire::kBytesContentType);
        res.body().source = std::make_shared<BlobBody>(std::move(reader), (*chunked)->size);
        res.prepare_payload();
        return res;
      }
    }
    return error(req, http::status::not_found, "no blob " + std::string(digest));
  }
  case http::verb::put: {
    if (const auto spool = std::dynamic_pointer_cast<UploadSpool>(req.body().source)) {
      if (spool->sha256_hex() != digest) {
        return error(req, http::status::bad_request,
                     "body hashes to " + spool->sha256_hex() + ", not to the URL's digest");
      }
      return put_spooled_blob(req, store_, artifacts_, digest, *spool, args.who.name);
    }
    const std::string actual = cachekey::to_hex(cachekey::Sha256::of(req.body()));
    if (actual != digest) {
      return error(req, http::status::bad_request,
                   "body hashes to " + actual + ", not to the URL's digest");
    }
    if (auto ok = store_.put(Area::kCas, digest, req.body()); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::created, json{{"digest", digest}});
  }
  default: {
    // A blob may back entries of every namespace.
    if (!args.who.may_everywhere(Role::kAdmin)) {
      return forbidden(req,
                       "deleting a CAS blob needs admin on \"*\" (token '" + args.who.name + "')");
    }
    if (auto ok = store_.remove(Area::kCas, digest); !ok) {
      return store_error(req, ok.error());
    }
    // A blob stored as chunks goes with its index (the chunks, shared by
    // content, stay for whoever else lists them; gc takes the rest).
    if (auto ok = store_.remove(Area::kAction, cas_index_key(digest)); !ok) {
      return store_error(req, ok.error());
    }
    return json_response(req, http::status::ok, json{{"deleted", digest}});
  }
  }
}

Response RequestHandler::artifact(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request,
                 "invalid action key (1-512 characters of [A-Za-z0-9._:+=-])");
  }
  if (req.method() == http::verb::get) {
    if (!may_read_key(args.who, artifacts_, key)) {
      return error(req, http::status::not_found, "no artifact for " + std::string(key));
    }
    auto head = artifacts_.get_head(key);
    if (!head) {
      return store_error(req, head.error());
    }
    if (!head->has_value()) {
      return error(req, http::status::not_found, "no artifact for " + std::string(key));
    }
    if (auto streamed = streamed_artifact(req, artifacts_, **head)) {
      return std::move(*streamed);
    }
    auto found = artifacts_.with_files(std::move(**head));
    if (!found) {
      return store_error(req, found.error());
    }
    if (!found->has_value()) {
      return error(req, http::status::not_found, "no artifact for " + std::string(key));
    }
    return artifact_response(req, std::move(**found), hit_copies_);
  }
  if (const auto spool = std::dynamic_pointer_cast<UploadSpool>(req.body().source)) {
    return put_spooled_artifact(req, store_, artifacts_, key, args.who, *spool);
  }
  auto parts = wire::decode_parts(req.body());
  if (!parts) {
    return error(req, http::status::bad_request, parts.error());
  }
  if (parts->empty() || parts->front().name != "record") {
    return error(req, http::status::bad_request, "the first part must be the \"record\"");
  }
  auto record = uploaded_record(req, key, args.who, parts->front().data);
  if (!record) {
    return std::move(record.error());
  }
  std::vector<storage::ArtifactFile> files;
  for (std::size_t i = 1; i < parts->size(); ++i) {
    files.push_back({std::move((*parts)[i].name), std::move((*parts)[i].data)});
  }
  auto stored = artifacts_.put(std::move(*record), std::move(files));
  if (!stored) {
    return stored.error().code == storage::StoreError::Code::kInvalidArgument
               ? error(req, http::status::bad_request, stored.error().message)
               : store_error(req, stored.error());
  }
  return make(req, http::status::created, storage::record_to_json(*stored), wire::kJsonContentType);
}

Response RequestHandler::batch_get(const Request& req, const RouteArgs& args) {
  const json doc = protocol::parse_json_or_discarded(req.body());
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array()) {
    return error(req, http::status::bad_request, "expected {\"keys\": [...]}");
  }
  if (doc["keys"].size() > kMaxBatchKeys) {
    return error(req, http::status::payload_too_large,
                 "at most " + std::to_string(kMaxBatchKeys) + " keys per batch");
  }
  // Every key is checked before anything is read: a bad key fails the batch.
  for (const json& k : doc["keys"]) {
    if (!k.is_string() || !wire::is_valid_action_key(k.get_ref<const std::string&>())) {
      return error(req, http::status::bad_request,
                   "invalid key in batch: " + protocol::json_text(k));
    }
  }
  // One part per key, named by it: the artifact's parts body, or nothing
  // for a miss. Each artifact is encoded straight into the batch's body (one
  // copy of its files; encoding it alone first cost a second).
  std::vector<std::optional<storage::Artifact>> found;
  found.reserve(doc["keys"].size());
  std::uint64_t total = wire::kPartsPrefixSize;
  std::uint64_t payload = 0;
  for (const json& k : doc["keys"]) {
    const auto& key = k.get_ref<const std::string&>();
    std::optional<storage::Artifact> hit;
    // Keys of namespaces this token may not read are misses.
    if (may_read_key(args.who, artifacts_, key)) {
      // A tier that cannot answer is a miss here: one bad key must not fail the batch.
      if (auto got = artifacts_.get(key); got && got->has_value()) {
        hit = std::move(**got);
      }
    }
    total += wire::part_head_size(key) + (hit ? encoded_size(*hit) : 0);
    payload += hit ? payload_of(*hit) : 0;
    found.push_back(std::move(hit));
  }
  std::string body;
  body.reserve(total);
  body += wire::encode_parts_prefix(found.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    const auto& key = doc["keys"][i].get_ref<const std::string&>();
    body += wire::encode_part_head(key, found[i] ? encoded_size(*found[i]) : 0);
    if (found[i]) {
      append_artifact(body, *found[i]);
    }
  }
  hit_copies_.count(payload, payload);
  return make(req, http::status::ok, std::move(body), wire::kPartsContentType);
}

} // namespace kcache::service
