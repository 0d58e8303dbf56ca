#include "openssl_handles.h"

#include <kcache/protocol/json_text.h>
#include <kcache/protocol/record_signature.h>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kcache::protocol {

using nlohmann::json;

namespace {

constexpr std::size_t kRawKeySize = 32;
constexpr std::size_t kSignatureSize = 64;
constexpr std::size_t kKeyIdLength = 16;
// Versioned, so a later message layout can never verify as this one.
constexpr std::string_view kDomainTag = "kcache.action-record.v1";

// The reason for the last OpenSSL failure; empties its error queue so that
// nothing stale is left for the next caller.
std::string openssl_error(std::string_view what) {
  std::string out(what);
  if (const unsigned long code = ERR_get_error(); code != 0) {
    std::array<char, 256> text{};
    ERR_error_string_n(code, text.data(), text.size());
    out += ": ";
    out += text.data();
  }
  ERR_clear_error();
  return out;
}

BioPtr memory_bio(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

bool is_ed25519(const EVP_PKEY* key) {
  return EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519;
}

std::string raw_public_key_of(const EVP_PKEY* key) {
  std::array<unsigned char, kRawKeySize> raw{};
  std::size_t size = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &size) != 1 || size != raw.size()) {
    ERR_clear_error();
    return {};
  }
  return {reinterpret_cast<const char*>(raw.data()), raw.size()};
}

std::string key_id_of_pkey(const EVP_PKEY* key) {
  const std::string raw = raw_public_key_of(key);
  if (raw.empty()) {
    return {};
  }
  return key_id_of(std::span(reinterpret_cast<const unsigned char*>(raw.data()), raw.size()));
}

void append_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out += static_cast<char>((v >> shift) & 0xffU);
  }
}

void append_field(std::string& out, std::string_view s) {
  append_u64(out, s.size());
  out += s;
}

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

tl::unexpected<SignatureError> malformed(std::string why) {
  return tl::unexpected(SignatureError{SignatureFailure::kMalformed, std::move(why)});
}

tl::expected<std::string, std::string> read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return tl::unexpected("cannot read " + file.string() + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

std::string_view failure_name(SignatureFailure failure) {
  switch (failure) {
  case SignatureFailure::kUnsigned:
    return "unsigned";
  case SignatureFailure::kUnknownKey:
    return "unknown-key";
  case SignatureFailure::kBadSignature:
    return "bad-signature";
  case SignatureFailure::kMalformed:
    break;
  }
  return "malformed";
}

std::string signing_message(const RecordFields& f) {
  std::string out;
  out.reserve(256 + f.outputs.size() * 96);
  append_field(out, kDomainTag);
  append_field(out, f.key);
  append_field(out, f.ns);
  append_field(out, f.writer);
  append_field(out, f.producer);
  append_u64(out, static_cast<std::uint64_t>(f.created_ms));
  append_u64(out, f.outputs.size());
  for (const SignedOutput& o : f.outputs) {
    append_field(out, o.name);
    append_field(out, o.digest);
    append_u64(out, o.size);
  }
  append_u64(out, f.metadata.size());
  for (const auto& [name, value] : f.metadata) {
    append_field(out, name);
    append_field(out, value);
  }
  return out;
}

std::string key_id_of(std::span<const unsigned char> raw_public_key) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(raw_public_key.data(), raw_public_key.size(), digest.data(), &size, EVP_sha256(),
                 nullptr) != 1) {
    ERR_clear_error();
    return {};
  }
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string id;
  for (std::size_t i = 0; i < kKeyIdLength / 2; ++i) {
    id += kHex[digest[i] >> 4U];
    id += kHex[digest[i] & 0xfU];
  }
  return id;
}

// ---- SigningKey ----

struct SigningKey::Key {
  PkeyPtr pkey;
};

SigningKey::SigningKey(std::unique_ptr<Key> key)
    : key_(std::move(key)), key_id_(key_id_of_pkey(key_->pkey.get())) {}
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;
SigningKey::~SigningKey() = default;

tl::expected<SigningKey, std::string> SigningKey::generate() {
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return tl::unexpected(openssl_error("cannot generate an Ed25519 key"));
  }
  return SigningKey(std::make_unique<Key>(Key{PkeyPtr(raw)}));
}

tl::expected<SigningKey, std::string> SigningKey::from_pem(std::string_view pem) {
  BioPtr bio = memory_bio(pem);
  PkeyPtr pkey(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!pkey) {
    return tl::unexpected(openssl_error("not a PEM private key"));
  }
  if (!is_ed25519(pkey.get())) {
    return tl::unexpected(std::string("not an Ed25519 key"));
  }
  return SigningKey(std::make_unique<Key>(Key{std::move(pkey)}));
}

tl::expected<SigningKey, std::string> SigningKey::load(const std::filesystem::path& file) {
  auto text = read_file(file);
  if (!text) {
    return tl::unexpected(text.error());
  }
  auto key = from_pem(*text);
  if (!key) {
    return tl::unexpected(file.string() + ": " + key.error());
  }
  return key;
}

tl::expected<SigningKey, std::string>
SigningKey::load_or_generate(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec)) {
    return load(file);
  }
  auto key = generate();
  if (!key) {
    return key;
  }
  if (auto saved = key->save(file); !saved) {
    // Another process may have won the race to create it: use theirs.
    if (std::filesystem::exists(file, ec)) {
      return load(file);
    }
    return tl::unexpected(saved.error());
  }
  return key;
}

std::string SigningKey::public_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key_->pkey.get()) != 1) {
    ERR_clear_error();
    return {};
  }
  return bio_text(bio.get());
}

std::string SigningKey::private_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key_->pkey.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    ERR_clear_error();
    return {};
  }
  return bio_text(bio.get());
}

tl::expected<void, std::string> SigningKey::save(const std::filesystem::path& file) const {
  const std::string pem = private_pem();
  if (pem.empty()) {
    return tl::unexpected(std::string("cannot encode the private key"));
  }
  // O_EXCL with 0600 from the start: the key is never readable by others,
  // not even between creation and a chmod.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return tl::unexpected("cannot create " + file.string() + ": " + std::strerror(errno));
  }
  std::size_t written = 0;
  while (written < pem.size()) {
    const ssize_t n = ::write(fd, pem.data() + written, pem.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      std::error_code ec;
      std::filesystem::remove(file, ec);
      return tl::unexpected("cannot write " + file.string() + ": " + why);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return tl::unexpected("cannot write " + file.string() + ": " + std::strerror(errno));
  }
  return {};
}

std::string SigningKey::sign_message(std::string_view message) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  std::string sig(kSignatureSize, '\0');
  std::size_t size = sig.size();
  // Ed25519 hashes internally: no digest (NULL), one-shot EVP_DigestSign.
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_->pkey.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1) {
    ERR_clear_error();
    return {};
  }
  sig.resize(size);
  return sig;
}

RecordSignature SigningKey::sign(const RecordFields& fields) const {
  return RecordSignature{std::string(kSignatureAlgorithm), key_id_,
                         base64_encode(sign_message(signing_message(fields)))};
}

// ---- TrustedKeys ----

struct TrustedKeys::Keys {
  struct Key {
    PkeyPtr pkey;
    std::string raw; // the raw public key (what a verified-record cache binds)
  };
  std::map<std::string, Key, std::less<>> by_id;
};

TrustedKeys::TrustedKeys() : keys_(std::make_unique<Keys>()) {}
TrustedKeys::TrustedKeys(TrustedKeys&&) noexcept = default;
TrustedKeys& TrustedKeys::operator=(TrustedKeys&&) noexcept = default;
TrustedKeys::~TrustedKeys() = default;

tl::expected<TrustedKeys, std::string> TrustedKeys::load(std::span<const std::string> paths) {
  TrustedKeys keys;
  for (const std::string& path : paths) {
    if (auto ok = keys.add_path(path); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  return keys;
}

tl::expected<void, std::string> TrustedKeys::add_path(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      const std::string ext = entry.path().extension().string();
      if ((ext == ".pem" || ext == ".pub") && entry.is_regular_file(ec)) {
        files.push_back(entry.path());
      }
    }
    if (ec) {
      return tl::unexpected("cannot list " + path.string() + ": " + ec.message());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      if (auto ok = add_path(file); !ok) {
        return ok;
      }
    }
    return {};
  }
  auto text = read_file(path);
  if (!text) {
    return tl::unexpected(text.error());
  }
  return add_pem(*text, path.string());
}

tl::expected<void, std::string> TrustedKeys::add_pem(std::string_view pem,
                                                     std::string_view origin) {
  BioPtr bio = memory_bio(pem);
  if (!bio) {
    return tl::unexpected(openssl_error(std::string(origin)));
  }
  std::size_t found = 0;
  // PEM_read_bio_PUBKEY skips blocks of other types (a private key, a
  // certificate) and fails at the end of the text.
  while (PkeyPtr pkey{PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr)}) {
    if (!is_ed25519(pkey.get())) {
      return tl::unexpected(std::string(origin) + ": a public key that is not Ed25519");
    }
    std::string id = key_id_of_pkey(pkey.get());
    std::string raw = raw_public_key_of(pkey.get());
    keys_->by_id.insert_or_assign(std::move(id), Keys::Key{std::move(pkey), std::move(raw)});
    ++found;
  }
  ERR_clear_error();
  if (found == 0) {
    return tl::unexpected(std::string(origin) + ": no PEM public key (\"BEGIN PUBLIC KEY\") in it");
  }
  return {};
}

void TrustedKeys::add(const SigningKey& key) {
  auto added = add_pem(key.public_pem(), "own key");
  (void)added; // a key we hold always encodes
}

bool TrustedKeys::contains(std::string_view key_id) const {
  return keys_->by_id.find(key_id) != keys_->by_id.end();
}

std::string TrustedKeys::raw_public_key(std::string_view key_id) const {
  const auto it = keys_->by_id.find(key_id);
  return it == keys_->by_id.end() ? std::string() : it->second.raw;
}

std::size_t TrustedKeys::size() const {
  return keys_->by_id.size();
}

std::vector<std::string> TrustedKeys::key_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, key] : keys_->by_id) {
    ids.push_back(id);
  }
  return ids;
}

tl::expected<void, SignatureError> TrustedKeys::verify(const RecordFields& fields,
                                                       const RecordSignature& signature) const {
  if (signature.alg != kSignatureAlgorithm) {
    return malformed("signature algorithm '" + signature.alg + "' (only ed25519)");
  }
  const auto it = keys_->by_id.find(signature.key_id);
  if (it == keys_->by_id.end()) {
    return tl::unexpected(
        SignatureError{SignatureFailure::kUnknownKey,
                       "signed by key " + signature.key_id + ", which is not trusted"});
  }
  auto sig = base64_decode(signature.sig);
  if (!sig) {
    return malformed("signature: " + sig.error());
  }
  if (sig->size() != kSignatureSize) {
    return malformed("signature of " + std::to_string(sig->size()) + " bytes (Ed25519: 64)");
  }
  const std::string message = signing_message(fields);
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const bool good =
      ctx &&
      EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, it->second.pkey.get()) == 1 &&
      EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  if (!good) {
    ERR_clear_error();
    return tl::unexpected(
        SignatureError{SignatureFailure::kBadSignature,
                       "the signature by key " + signature.key_id + " does not match the record"});
  }
  return {};
}

// ---- base64 ----

namespace {

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+') {
    return 62;
  }
  return c == '/' ? 63 : -1;
}

} // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      v = (v << 8U) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0U);
    }
    for (std::size_t j = 0; j < 4; ++j) {
      out += j <= n ? kBase64[(v >> (18 - 6 * j)) & 0x3fU] : '=';
    }
  }
  return out;
}

tl::expected<std::string, std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return tl::unexpected(std::string("base64 length is not a multiple of 4"));
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    std::size_t pad = 0;
    if (last) {
      pad = text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
    }
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      int d = 0;
      if (j < 4 - pad) {
        d = base64_value(text[i + j]);
        if (d < 0) {
          return tl::unexpected("invalid base64 character at " + std::to_string(i + j));
        }
      }
      v = (v << 6U) | static_cast<std::uint32_t>(d);
    }
    // Bits under the padding must be zero: one encoding per value.
    if ((pad == 1 && (v & 0xffU) != 0) || (pad == 2 && (v & 0xffffU) != 0)) {
      return tl::unexpected(std::string("non-canonical base64 padding"));
    }
    for (std::size_t j = 0; j < 3 - pad; ++j) {
      out += static_cast<char>((v >> (16 - 8 * j)) & 0xffU);
    }
  }
  return out;
}

// ---- JSON ----

json to_json(const RecordSignature& s) {
  return json{{"alg", s.alg}, {"key_id", s.key_id}, {"sig", s.sig}};
}

tl::expected<RecordSignature, SignatureError> record_signature_from_json(const json& doc) {
  if (!doc.is_object()) {
    return malformed("\"signature\" is not an object");
  }
  RecordSignature s;
  for (auto [name, field] :
       {std::pair{"alg", &s.alg}, std::pair{"key_id", &s.key_id}, std::pair{"sig", &s.sig}}) {
    const auto it = doc.find(name);
    if (it == doc.end() || !it->is_string()) {
      return malformed(std::string("signature member \"") + name + "\" missing or not a string");
    }
    *field = it->get<std::string>();
  }
  if (s.alg != kSignatureAlgorithm) {
    return malformed("signature algorithm '" + s.alg + "' (only ed25519)");
  }
  if (s.key_id.size() != kKeyIdLength || !is_lower_hex(s.key_id)) {
    return malformed("signature key_id is not 16 lowercase hex digits");
  }
  return s;
}

tl::expected<RecordFields, SignatureError> record_fields_from_json(const json& doc) {
  if (!doc.is_object()) {
    return malformed("the record is not a JSON object");
  }
  auto string_member = [&doc](const char* name, std::string& into,
                              bool required) -> tl::expected<void, SignatureError> {
    const auto it = doc.find(name);
    if (it == doc.end() || it->is_null()) {
      if (required) {
        return malformed(std::string("record member \"") + name + "\" missing");
      }
      return {};
    }
    if (!it->is_string()) {
      return malformed(std::string("record member \"") + name + "\" is not a string");
    }
    into = it->get<std::string>();
    return {};
  };
  RecordFields f;
  for (auto [name, into, required] :
       {std::tuple{"key", &f.key, true}, std::tuple{"namespace", &f.ns, false},
        std::tuple{"writer", &f.writer, false}, std::tuple{"producer", &f.producer, false}}) {
    if (auto ok = string_member(name, *into, required); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  try {
    f.created_ms = json_integer<std::int64_t>(doc, "created_ms", 0);
    const auto outputs = doc.find("outputs");
    if (outputs == doc.end() || !outputs->is_array()) {
      return malformed("record member \"outputs\" missing or not an array");
    }
    for (const json& o : *outputs) {
      if (!o.is_object()) {
        return malformed("an output is not an object");
      }
      f.outputs.push_back(SignedOutput{o.at("name").get<std::string>(),
                                       o.at("digest").get<std::string>(),
                                       json_integer<std::uint64_t>(o.at("size"))});
    }
    if (const auto metadata = doc.find("metadata"); metadata != doc.end() && !metadata->is_null()) {
      if (!metadata->is_object()) {
        return malformed("record member \"metadata\" is not an object");
      }
      for (const auto& [name, value] : metadata->items()) {
        f.metadata.emplace(name, value.get<std::string>());
      }
    }
  } catch (const json::exception& e) {
    return malformed(std::string("record: ") + e.what());
  }
  return f;
}

tl::expected<VerifiedRecord, SignatureError> verify_record(std::string_view key, const json& record,
                                                           const TrustedKeys& trusted) {
  auto fields = record_fields_from_json(record);
  if (!fields) {
    return tl::unexpected(fields.error());
  }
  const auto sig = record.find("signature");
  if (sig == record.end() || sig->is_null()) {
    return tl::unexpected(SignatureError{SignatureFailure::kUnsigned, "the record is not signed"});
  }
  auto signature = record_signature_from_json(*sig);
  if (!signature) {
    return tl::unexpected(signature.error());
  }
  if (fields->key != key) {
    return tl::unexpected(SignatureError{SignatureFailure::kBadSignature,
                                         "the record is for key '" + fields->key + "'"});
  }
  if (auto ok = trusted.verify(*fields, *signature); !ok) {
    return tl::unexpected(ok.error());
  }
  return VerifiedRecord{signature->key_id,           std::move(fields->writer),
                        std::move(fields->producer), std::move(fields->ns),
                        fields->created_ms,          std::move(fields->outputs)};
}

tl::expected<VerifiedRecord, SignatureError>
verify_record_json(std::string_view key, std::string_view record_json, const TrustedKeys& trusted) {
  const json doc = parse_json_or_discarded(record_json);
  if (doc.is_discarded()) {
    return malformed("the record is not JSON");
  }
  return verify_record(key, doc, trusted);
}

} // namespace kcache::protocol
