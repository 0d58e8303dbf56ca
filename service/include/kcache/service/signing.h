#pragma once
// kcached's side of signed action records (issue 14, contract.md): the node's
// Ed25519 key (config [signing] key_file, generated once into
// data_dir/signing.pem with mode 0600), the public keys it trusts
// (trusted_keys, plus its own), the signer its ArtifactStores use, and the
// check its shared tier applies (storage/signature_checking_store.h).

#include <kcache/protocol/record_signature.h>
#include <kcache/service/config.h>
#include <kcache/service/metrics.h>
#include <kcache/storage/record_signer.h>
#include <kcache/storage/signature_checking_store.h>

#include <tl/expected.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kcache::service {

// The key file kcached uses for `config` and `data_dir`.
std::string signing_key_path(const SigningConfig& config, const std::string& data_dir);

// The namespace a record is signed with (contract.md): kc1- keys their
// manifest's ns, <kind>:<ns>:<rest> keys the second field, others "".
std::string record_namespace(const storage::ActionRecord& record);

class Signing {
public:
  // Loads (or first generates) the key and loads every trusted key; fails
  // naming the file that could not be used.
  static tl::expected<std::unique_ptr<Signing>, std::string> create(const SigningConfig& config,
                                                                    const std::string& data_dir);

  const protocol::SigningKey& key() const { return key_; }
  const storage::RecordSigner& signer() const { return signer_; }
  storage::SignatureCheck check() const { return {trusted_, rejections_, verified_}; }
  const protocol::TrustedKeys& trusted() const { return *trusted_; }

  // kcache_signature_rejected_total{reason}: records a shared tier had that
  // were refused (unsigned, unknown-key, bad-signature, malformed);
  // kcache_signature_cache_total{result}: checks answered by the cache of
  // verified records (hit) or by Ed25519 (miss).
  void add_metrics(MetricsRegistry& metrics) const;

  Signing(protocol::SigningKey key, std::shared_ptr<const protocol::TrustedKeys> trusted);

private:
  protocol::SigningKey key_;
  std::shared_ptr<const protocol::TrustedKeys> trusted_;
  std::shared_ptr<storage::SignatureRejections> rejections_;
  // Created with trusted_, so a new trusted set comes with an empty cache.
  std::shared_ptr<protocol::VerifiedSignatureCache> verified_;
  storage::KeyRecordSigner signer_;
};

} // namespace kcache::service
