#pragma once
// End-to-end verification of what kcached serves (issue 14): an artifact is
// used only when its action record is signed by a key this client trusts AND
// every file's SHA-256 and size are the ones the record lists. kcached checks
// what it reads from a shared tier too, but a trainer that verifies itself
// needs to trust neither kcached, its tiers, nor the network between them.
// A refused artifact is a miss (fail open), counted by reason.

#include <kcache/client/artifact.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/protocol/verified_signature_cache.h>

#include <tl/expected.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::client {

// Why an artifact was refused: the four signature failures of
// record_signature.h, then a content mismatch (a file whose bytes are not the
// record's, a file missing, or one the record does not list).
enum class Rejection : std::uint8_t {
  kUnsigned,
  kUnknownKey,
  kBadSignature,
  kMalformed,
  kContentMismatch,
};
inline constexpr std::size_t kRejectionCount = 5;
// "unsigned", "unknown-key", "bad-signature", "malformed", "content-mismatch".
std::string_view rejection_name(Rejection reason);

struct VerifyError {
  Rejection reason = Rejection::kMalformed;
  std::string message;
};

// The record's signature over artifact.key by a key in `trusted`, then the
// files against the record's outputs (by name, in any order). With `cache`,
// a record verified before (same key, same record bytes, its key still
// trusted) skips the Ed25519 check; the files are hashed every time (they are
// the bytes that just came over the wire).
tl::expected<protocol::VerifiedRecord, VerifyError>
verify_artifact(const Artifact& artifact, const protocol::TrustedKeys& trusted,
                protocol::VerifiedSignatureCache* cache = nullptr);

// What a client's verification did so far.
struct VerificationStats {
  bool enabled = false;
  std::uint64_t verified = 0;
  std::array<std::uint64_t, kRejectionCount> rejected{}; // by Rejection
  std::string last_rejection; // "<key>: <reason>: <message>" of the latest one
  // Record checks answered by the cache of verified records / by Ed25519.
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t rejected_total() const;
};

// A client's trusted keys, its cache of verified records (one per client:
// it lives and dies with this trusted set) and counters; thread-safe.
class Verifier {
public:
  explicit Verifier(protocol::TrustedKeys trusted) : trusted_(std::move(trusted)) {}

  // The artifact when it verifies; nullopt (a miss) when it does not.
  std::optional<Artifact> screen(std::optional<Artifact> artifact);
  VerificationStats stats() const;
  const protocol::TrustedKeys& trusted() const { return trusted_; }

private:
  const protocol::TrustedKeys trusted_;
  protocol::VerifiedSignatureCache cache_;
  std::atomic<std::uint64_t> verified_{0};
  std::array<std::atomic<std::uint64_t>, kRejectionCount> rejected_{};
  mutable std::mutex last_mutex_;
  std::string last_rejection_;
};

} // namespace kcache::client
