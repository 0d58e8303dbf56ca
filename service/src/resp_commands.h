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
#include <kcache/service/hit_copies.h>
#include <kcache/service/metrics.h>
#include <kcache/service/tokens.h>
#include <kcache/storage/artifact_store.h>

#include <boost/asio/buffer.hpp>

#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

class LeaseTable;

// Replies not yet written: text, and large values kept as the store handed
// them out (its shared buffers, storage/store.h), written with the text
// around them in one gathered write. A GET's value from the memory tier is
// then not copied at all: the socket is written from the tier's buffer.
class RespOut {
public:
  // Values at least this large are kept as pieces of their own; smaller ones
  // are appended to the text (a copy costs less than another iovec).
  static constexpr std::size_t kPieceBytes = 4 << 10;
  static constexpr std::size_t kKeepBytes = 64 << 10;

  // The text to append to (after the last value).
  std::string& text() {
    if (texts_.size() == values_.size()) {
      texts_.emplace_back();
    }
    return texts_.back();
  }
  // A bulk string's payload: $<n>\r\n, the bytes, \r\n. Returns how many of
  // the value's bytes were copied (into the text; 0 when kept as a piece).
  std::size_t bulk(storage::SharedBytes data) {
    std::string& head = text();
    head.append("$").append(std::to_string(data.size())).append("\r\n");
    if (data.size() < kPieceBytes) {
      head.append(data.view()).append("\r\n");
      return data.size();
    }
    size_ += data.size();
    values_.push_back(std::move(data));
    text().append("\r\n");
    return 0;
  }
  std::size_t size() const {
    std::size_t n = size_;
    for (const std::string& t : texts_) {
      n += t.size();
    }
    return n;
  }
  bool empty() const { return size() == 0; }
  // The pieces to write, in order, into `out`; valid until this changes.
  void buffers(std::vector<boost::asio::const_buffer>& out) const {
    out.clear();
    for (std::size_t i = 0; i < texts_.size(); ++i) {
      if (!texts_[i].empty()) {
        out.emplace_back(texts_[i].data(), texts_[i].size());
      }
      if (i < values_.size() && !values_[i].empty()) {
        out.emplace_back(values_[i].data(), values_[i].size());
      }
    }
  }
  // Everything as one string (tests, the fuzzer).
  std::string flat() const {
    std::string out;
    for (std::size_t i = 0; i < texts_.size(); ++i) {
      out += texts_[i];
      if (i < values_.size()) {
        out += values_[i].view();
      }
    }
    return out;
  }
  // Keeps the first text's memory when small: the next replies reuse it.
  void clear() {
    if (!texts_.empty() && texts_.front().capacity() <= kKeepBytes) {
      texts_.resize(1);
      texts_.front().clear();
    } else {
      texts_.clear();
    }
    values_.clear();
    size_ = 0;
  }
  void swap(RespOut& other) noexcept {
    texts_.swap(other.texts_);
    values_.swap(other.values_);
    std::swap(size_, other.size_);
  }

private:
  // texts_[i] goes before values_[i]; texts_ has as many entries as values_,
  // or one more (the text after the last value).
  std::vector<std::string> texts_;
  std::vector<storage::SharedBytes> values_;
  std::size_t size_ = 0; // the values' bytes
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

  // The command names counted apart in kcache_resp_commands_total, "other" included.
  static constexpr std::size_t kCountedCommands = 19;

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
  HitCopies hit_copies_; // a GET's value and its copies
  // count()'s counters by command and outcome, set on first use.
  std::array<std::atomic<Counter*>, kCountedCommands * 2> command_counters_{};
};

} // namespace kcache::service
