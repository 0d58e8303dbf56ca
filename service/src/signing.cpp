#include <kcache/service/key_namespace.h>
#include <kcache/service/signing.h>

#include <spdlog/spdlog.h>

#include <filesystem>

namespace kcache::service {

std::string signing_key_path(const SigningConfig& config, const std::string& data_dir) {
  return config.key_file.empty() ? (std::filesystem::path(data_dir) / "signing.pem").string()
                                 : config.key_file;
}

std::string record_namespace(const storage::ActionRecord& record) {
  const KeyScope scope = key_scope(record.key);
  switch (scope.kind) {
  case KeyScope::Kind::kManifest:
    return record.manifest ? record.manifest->ns : std::string();
  case KeyScope::Kind::kCompile:
    return {};
  case KeyScope::Kind::kNamed:
    break;
  }
  return scope.ns;
}

Signing::Signing(protocol::SigningKey key, std::shared_ptr<const protocol::TrustedKeys> trusted)
    : key_(std::move(key)), trusted_(std::move(trusted)),
      rejections_(std::make_shared<storage::SignatureRejections>()),
      verified_(std::make_shared<protocol::VerifiedSignatureCache>()),
      signer_(key_, record_namespace, trusted_) {}

tl::expected<std::unique_ptr<Signing>, std::string> Signing::create(const SigningConfig& config,
                                                                    const std::string& data_dir) {
  const std::string path = signing_key_path(config, data_dir);
  const bool existed = std::filesystem::exists(path);
  auto key = protocol::SigningKey::load_or_generate(path);
  if (!key) {
    return tl::unexpected("[signing] key_file: " + key.error());
  }
  if (!existed) {
    spdlog::info("signing: generated a new key {} in {} (share its public key: kcached "
                 "--print-public-key)",
                 key->key_id(), path);
  }
  auto trusted = protocol::TrustedKeys::load(config.trusted_keys);
  if (!trusted) {
    return tl::unexpected("[signing] trusted_keys: " + trusted.error());
  }
  trusted->add(*key); // a node always trusts its own writes
  std::string ids;
  for (const std::string& id : trusted->key_ids()) {
    ids += (ids.empty() ? "" : ", ") + id;
  }
  spdlog::info("signing: records signed with key {}; shared-tier records trusted from {}",
               key->key_id(), ids);
  return std::make_unique<Signing>(
      std::move(*key), std::make_shared<const protocol::TrustedKeys>(std::move(*trusted)));
}

void Signing::add_metrics(MetricsRegistry& metrics) const {
  metrics.describe("kcache_signature_rejected_total", "counter",
                   "Action records from a shared tier refused for their signature, by reason");
  metrics.add_collector([rejections = rejections_](std::vector<MetricsRegistry::Sample>& out) {
    for (const auto failure :
         {protocol::SignatureFailure::kUnsigned, protocol::SignatureFailure::kUnknownKey,
          protocol::SignatureFailure::kBadSignature, protocol::SignatureFailure::kMalformed}) {
      out.push_back({"kcache_signature_rejected_total",
                     {{"reason", std::string(protocol::failure_name(failure))}},
                     static_cast<double>(rejections->count(failure))});
    }
  });
  metrics.describe("kcache_signature_cache_total", "counter",
                   "Shared-tier record checks answered by the verified-record cache (hit) or by "
                   "an Ed25519 verification (miss)");
  metrics.add_collector([verified = verified_](std::vector<MetricsRegistry::Sample>& out) {
    const protocol::VerifiedSignatureCache::Stats stats = verified->stats();
    out.push_back(
        {"kcache_signature_cache_total", {{"result", "hit"}}, static_cast<double>(stats.hits)});
    out.push_back(
        {"kcache_signature_cache_total", {{"result", "miss"}}, static_cast<double>(stats.misses)});
  });
}

} // namespace kcache::service
