#pragma once
// Signed action records (issue 14): kcached signs every record it stores with
// its Ed25519 key (OpenSSL EVP); readers of a shared tier (kcached, libkcache)
// verify the signature against a set of trusted public keys before they use
// the record. Nothing else proves who stored an entry: a shared Redis accepts
// whatever its clients write, content hashes included.
//
// The signature covers a canonical, length-prefixed message (never the JSON
// text, whose spelling is not unique): a domain tag, the key, the namespace,
// the writer, the producer, created_ms, every output's name, digest and size
// in order, and the metadata map. The manifest is bound through the key (it
// must hash to it).
//
// Record JSON members this file reads and writes: "key", "namespace",
// "writer", "producer", "created_ms", "outputs" [{"name","digest","size"}],
// "metadata" {string: string}, and
//   "signature": {"alg": "ed25519", "key_id": "<16 hex>", "sig": "<base64 of 64 bytes>"}

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::protocol {

inline constexpr std::string_view kSignatureAlgorithm = "ed25519";

struct SignedOutput {
  std::string name;
  std::string digest; // sha256 hex
  std::uint64_t size = 0;
  friend bool operator==(const SignedOutput&, const SignedOutput&) = default;
};

// What a record signature covers.
struct RecordFields {
  std::string key;
  std::string ns;     // the key's namespace ("" for none)
  std::string writer; // token name, "anonymous", or the job's submitter
  std::string producer;
  std::int64_t created_ms = 0;
  std::vector<SignedOutput> outputs;
  std::map<std::string, std::string> metadata;
  friend bool operator==(const RecordFields&, const RecordFields&) = default;
};

struct RecordSignature {
  std::string alg{kSignatureAlgorithm};
  std::string key_id; // 16 hex chars: the start of SHA-256 of the raw public key
  std::string sig;    // base64 (standard alphabet, padded) of the 64-byte signature
  friend bool operator==(const RecordSignature&, const RecordSignature&) = default;
};

// Why a record is not accepted; readers count by failure_name().
enum class SignatureFailure : std::uint8_t {
  kUnsigned,     // no "signature" member
  kUnknownKey,   // signed by a key that is not trusted (or no longer: revoked)
  kBadSignature, // a trusted key id, but the signature does not match the fields
  kMalformed,    // not a record, or a signature member of the wrong shape
};
// "unsigned", "unknown-key", "bad-signature", "malformed".
std::string_view failure_name(SignatureFailure failure);
inline constexpr std::size_t kSignatureFailureCount = 4;

struct SignatureError {
  SignatureFailure failure = SignatureFailure::kMalformed;
  std::string message;
};

// The message a signature covers (exposed for tests and benchmarks).
std::string signing_message(const RecordFields& fields);

// Key id of a raw 32-byte Ed25519 public key.
std::string key_id_of(std::span<const unsigned char> raw_public_key);

// An Ed25519 private key. Movable, not copyable (it owns an EVP_PKEY).
class SigningKey {
public:
  static tl::expected<SigningKey, std::string> generate();
  // A PKCS#8 PEM private key ("BEGIN PRIVATE KEY") of type Ed25519.
  static tl::expected<SigningKey, std::string> from_pem(std::string_view pem);
  static tl::expected<SigningKey, std::string> load(const std::filesystem::path& file);
  // `file` when it exists; otherwise a new key written there with mode 0600
  // (created exclusively, so two starts never write two keys).
  static tl::expected<SigningKey, std::string> load_or_generate(const std::filesystem::path& file);

  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;
  ~SigningKey();

  const std::string& key_id() const { return key_id_; }
  std::string public_pem() const;
  std::string private_pem() const;
  // Writes private_pem() to a new file (mode 0600); fails if `file` exists.
  tl::expected<void, std::string> save(const std::filesystem::path& file) const;

  RecordSignature sign(const RecordFields& fields) const;
  // The raw 64-byte signature of `message`.
  std::string sign_message(std::string_view message) const;

  struct Key;

private:
  explicit SigningKey(std::unique_ptr<Key> key);
  std::unique_ptr<Key> key_;
  std::string key_id_;
};

// Public keys a reader trusts, by key id. Several keys allow rotation; a key
// taken out of the set (revoked) makes its signatures unknown-key.
class TrustedKeys {
public:
  TrustedKeys();
  TrustedKeys(TrustedKeys&&) noexcept;
  TrustedKeys& operator=(TrustedKeys&&) noexcept;
  ~TrustedKeys();

  // Each path is a PEM file (one or more "BEGIN PUBLIC KEY" blocks) or a
  // directory, whose *.pem and *.pub files are read. Any unreadable file or
  // non-Ed25519 key fails, naming the file.
  static tl::expected<TrustedKeys, std::string> load(std::span<const std::string> paths);

  tl::expected<void, std::string> add_path(const std::filesystem::path& path);
  // Every public key in `pem`; `origin` names it in errors.
  tl::expected<void, std::string> add_pem(std::string_view pem, std::string_view origin = "PEM");
  void add(const SigningKey& key); // kcached always trusts its own key

  bool contains(std::string_view key_id) const;
  // The raw 32-byte public key trusted under `key_id`; "" when none is.
  std::string raw_public_key(std::string_view key_id) const;
  std::size_t size() const;
  std::vector<std::string> key_ids() const;

  tl::expected<void, SignatureError> verify(const RecordFields& fields,
                                            const RecordSignature& signature) const;

  struct Keys;

private:
  std::unique_ptr<Keys> keys_;
};

// Standard base64 with padding; decoding is strict (no whitespace, no
// missing or extra padding, canonical trailing bits).
std::string base64_encode(std::string_view bytes);
tl::expected<std::string, std::string> base64_decode(std::string_view text);

nlohmann::json to_json(const RecordSignature& signature);
// {"alg": "ed25519", "key_id": "<16 hex>", "sig": "<base64>"}; other
// algorithms and shapes are malformed.
tl::expected<RecordSignature, SignatureError> record_signature_from_json(const nlohmann::json& doc);

// The signed fields of a record document (members above); a wrong type is
// malformed. A missing "namespace"/"writer" reads as "".
tl::expected<RecordFields, SignatureError> record_fields_from_json(const nlohmann::json& record);

// What a verified record says about its origin (`kcache show`, logs).
struct VerifiedRecord {
  std::string key_id;
  std::string writer;
  std::string producer;
  std::string ns;
  std::int64_t created_ms = 0;
  std::vector<SignedOutput> outputs; // what the files must hash to (clients check)
};

// Checks that `record_json` is a record for `key` signed by a trusted key.
// A record naming another key is bad-signature (a genuine record copied
// under a second key).
tl::expected<VerifiedRecord, SignatureError>
verify_record_json(std::string_view key, std::string_view record_json, const TrustedKeys& trusted);
tl::expected<VerifiedRecord, SignatureError>
verify_record(std::string_view key, const nlohmann::json& record, const TrustedKeys& trusted);

} // namespace kcache::protocol
