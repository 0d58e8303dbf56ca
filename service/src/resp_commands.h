#pragma once
// The Redis commands kcached answers on its RESP listener (resp_server.h),
// over the same ArtifactStore, tokens and namespace scopes as the HTTP API.
//
// A RESP key K is the kcache key "resp:<namespace>:<K>" (key_namespace.h's
// named form, so token scopes apply to <namespace>, the configured one), with
// every byte outside the action-key alphabet, and '=' itself, written "=XX"
// (hex): distinct RESP keys never share a kcache key. A value is an artifact
// with one file, "value": framed, hashed, signed and stored in every tier like
// a PUT /v1/artifacts; GET answers that file's bytes. An artifact stored over
// HTTP under such a key with exactly one file reads back the same way.

#include <kcache/service/config.h>
#include <kcache/service/metrics.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/artifact_store.h>

#include <boost/asio/buffer.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

class LeaseTable;

// Replies not yet written: text, and large values kept as the store handed
// them out (moved in, not copied), written with the text around them in one
// gathered write. A GET's value is then copied once per answer, by the
// memory tier's read, never into a reply string.
class RespOut {
public:
  // Values at least this large are kept as pieces of their own; smaller ones
  // are appended to the text (a copy costs less than another iovec).
  static constexpr std::size_t kPieceBytes = 4 << 10;
  static constexpr std::size_t kKeepBytes = 64 << 10;

  // The text to append to (after the last value).
  std::string& text() {
    if (pieces_.empty() || last_is_value_) {
      pieces_.emplace_back();
      last_is_value_ = false;
    }
    return pieces_.back();
  }
  // A bulk string's payload: $<n>\r\n, the bytes, \r\n.
  void bulk(std::string data) {
    std::string& head = text();
    head.append("$").append(std::to_string(data.size())).append("\r\n");
    if (data.size() < kPieceBytes) {
      head.append(data).append("\r\n");
      return;
    }
    size_ += data.size();
    pieces_.push_back(std::move(data));
    last_is_value_ = true;
    text().append("\r\n");
  }
  std::size_t size() const {
    std::size_t n = size_;
    for (std::size_t i = 0; i < pieces_.size(); ++i) {
      n += is_text(i) ? pieces_[i].size() : 0;
    }
    return n;
  }
  bool empty() const { return size() == 0; }
  // The pieces to write, in order, into `out`; valid until this changes.
  void buffers(std::vector<boost::asio::const_buffer>& out) const {
    out.clear();
    for (const std::string& piece : pieces_) {
      if (!piece.empty()) {
        out.emplace_back(piece.data(), piece.size());
      }
    }
  }
  // Everything as one string (tests, the fuzzer).
  std::string flat() const {
    std::string out;
    for (const std::string& piece : pieces_) {
      out += piece;
    }
    return out;
  }
  // Keeps the first text's memory when small: the next replies reuse it.
  void clear() {
    if (!pieces_.empty() && pieces_.front().capacity() <= kKeepBytes) {
      pieces_.resize(1);
      pieces_.front().clear();
    } else {
      pieces_.clear();
    }
    size_ = 0;
    last_is_value_ = false;
  }
  void swap(RespOut& other) noexcept {
    pieces_.swap(other.pieces_);
    std::swap(size_, other.size_);
    std::swap(last_is_value_, other.last_is_value_);
  }

private:
  // Text pieces and value pieces alternate, text first.
  bool is_text(std::size_t i) const { return i % 2 == 0; }

  std::vector<std::string> pieces_;
  std::size_t size_ = 0; // the values' bytes
  bool last_is_value_ = false;
};

// What one connection has said about itself (AUTH).
struct RespSession {
  const Principal* who = nullptr; // null: not authenticated (tokens configured)
  bool quit = false;              // QUIT: close once the reply is written
  bool resp3 = false;             // HELLO 3: nulls are "_" (no other RESP3 type is sent)
};

class RespCommands {
public:
  RespCommands(storage::Store& store, const storage::RecordSigner* signer,
               std::vector<Token> tokens, std::string ns, std::uint64_t max_value_bytes,
               MetricsRegistry& metrics, LeaseTable* leases = nullptr);

  // A new connection's state: anonymous (admin) without tokens, else none.
  RespSession open() const;
  // Runs one command (args[0] the name) and appends its reply to `out`.
  void execute(const std::vector<std::string>& args, RespSession& session, RespOut& out);
  // The same, the reply as one string.
  void execute(const std::vector<std::string>& args, RespSession& session, std::string& out);
  // A protocol error's reply (the connection closes after it), counted.
  void protocol_error(const std::string& message, std::string& out);

  // The kcache key of RESP key `key` in `ns`; nullopt when too long.
  static std::optional<std::string> kcache_key(std::string_view ns, std::string_view key);
  // Whether `ns` can be a RESP namespace (it sits between ':' in keys).
  static bool valid_namespace(std::string_view ns);

private:
  void count(std::string_view command, bool ok);
  // GET's reply (the value, or nil); false on an error, whose reply is
  // appended, or a nil in its place when `error_as_nil` (MGET).
  bool get(std::string_view key, const RespSession& session, RespOut& out, bool error_as_nil);
  void set(const std::vector<std::string>& args, const RespSession& session, std::string& out);
  void del(const std::vector<std::string>& args, const Principal& who, std::string& out);
  void auth(std::string_view user, std::string_view password, RespSession& session,
            std::string& out);
  void hello(const std::vector<std::string>& args, RespSession& session, std::string& out);
  // -1 present, -2 missing, nullopt after an error reply was appended.
  std::optional<bool> exists(std::string_view key, const Principal& who, std::string& out);

  storage::Store& store_;
  storage::ArtifactStore artifacts_;
  std::vector<Token> tokens_;
  std::vector<Principal> principals_;
  const Principal anonymous_ = Principal::anonymous();
  std::string ns_;
  std::uint64_t max_value_bytes_;
  MetricsRegistry& metrics_;
  LeaseTable* leases_;
  Counter& protocol_errors_;
};

} // namespace kcache::service
