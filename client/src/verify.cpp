#include <kcache/cachekey/sha256.h>
#include <kcache/client/verify.h>

#include <map>

namespace kcache::client {
namespace {

Rejection from_signature(protocol::SignatureFailure failure) {
  switch (failure) {
  case protocol::SignatureFailure::kUnsigned:
    return Rejection::kUnsigned;
  case protocol::SignatureFailure::kUnknownKey:
    return Rejection::kUnknownKey;
  case protocol::SignatureFailure::kBadSignature:
    return Rejection::kBadSignature;
  case protocol::SignatureFailure::kMalformed:
    return Rejection::kMalformed;
  }
  return Rejection::kMalformed;
}

tl::unexpected<VerifyError> mismatch(std::string message) {
  return tl::unexpected(VerifyError{Rejection::kContentMismatch, std::move(message)});
}

// Every file is an output of the (signed) record, with its digest and size,
// and every output is there: a signature over the record says nothing about
// bytes that were swapped in beside it.
tl::expected<void, VerifyError> check_files(const Artifact& artifact,
                                            const std::vector<protocol::SignedOutput>& outputs) {
  std::map<std::string_view, const protocol::SignedOutput*> by_name;
  for (const protocol::SignedOutput& o : outputs) {
    if (!by_name.emplace(o.name, &o).second) {
      return mismatch("the record lists output '" + o.name + "' twice");
    }
  }
  if (artifact.files.size() != outputs.size()) {
    return mismatch("the record lists " + std::to_string(outputs.size()) + " outputs, " +
                    std::to_string(artifact.files.size()) + " files came");
  }
  for (const File& f : artifact.files) {
    const auto it = by_name.find(f.name);
    if (it == by_name.end()) {
      return mismatch("file '" + f.name + "' is not in the record");
    }
    const protocol::SignedOutput& o = *it->second;
    by_name.erase(it); // a name sent twice is then "not in the record"
    if (f.data.size() != o.size) {
      return mismatch("file '" + f.name + "' has " + std::to_string(f.data.size()) +
                      " bytes, the record says " + std::to_string(o.size));
    }
    if (cachekey::to_hex(cachekey::Sha256::of(f.data)) != o.digest) {
      return mismatch("file '" + f.name + "' does not hash to the record's digest");
    }
  }
  return {};
}

} // namespace

std::string_view rejection_name(Rejection reason) {
  switch (reason) {
  case Rejection::kUnsigned:
    return "unsigned";
  case Rejection::kUnknownKey:
    return "unknown-key";
  case Rejection::kBadSignature:
    return "bad-signature";
  case Rejection::kMalformed:
    return "malformed";
  case Rejection::kContentMismatch:
    return "content-mismatch";
  }
  return "malformed";
}

tl::expected<protocol::VerifiedRecord, VerifyError>
verify_artifact(const Artifact& artifact, const protocol::TrustedKeys& trusted,
                protocol::VerifiedSignatureCache* cache) {
  auto verified = cache != nullptr
                      ? cache->verify(artifact.key, artifact.record_json, trusted)
                      : protocol::verify_record_json(artifact.key, artifact.record_json, trusted);
  if (!verified) {
    return tl::unexpected(
        VerifyError{from_signature(verified.error().failure), verified.error().message});
  }
  if (auto ok = check_files(artifact, verified->outputs); !ok) {
    return tl::unexpected(ok.error());
  }
  return std::move(*verified);
}

std::uint64_t VerificationStats::rejected_total() const {
  std::uint64_t total = 0;
  for (const std::uint64_t n : rejected) {
    total += n;
  }
  return total;
}

std::optional<Artifact> Verifier::screen(std::optional<Artifact> artifact) {
  if (!artifact) {
    return artifact;
  }
  auto ok = verify_artifact(*artifact, trusted_, &cache_);
  if (ok) {
    verified_.fetch_add(1, std::memory_order_relaxed);
    return artifact;
  }
  rejected_[static_cast<std::size_t>(ok.error().reason)].fetch_add(1, std::memory_order_relaxed);
  const std::lock_guard lock(last_mutex_);
  last_rejection_ = artifact->key + ": " + std::string(rejection_name(ok.error().reason)) + ": " +
                    ok.error().message;
  return std::nullopt;
}

VerificationStats Verifier::stats() const {
  VerificationStats out;
  out.enabled = true;
  out.verified = verified_.load(std::memory_order_relaxed);
  const protocol::VerifiedSignatureCache::Stats cache = cache_.stats();
  out.cache_hits = cache.hits;
  out.cache_misses = cache.misses;
  for (std::size_t i = 0; i < kRejectionCount; ++i) {
    out.rejected[i] = rejected_[i].load(std::memory_order_relaxed);
  }
  const std::lock_guard lock(last_mutex_);
  out.last_rejection = last_rejection_;
  return out;
}

} // namespace kcache::client
