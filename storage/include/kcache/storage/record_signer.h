#pragma once
// Signs the action records an ArtifactStore writes (issue 14): the node's
// Ed25519 key over the record's key, namespace, writer, producer, time,
// outputs and metadata (protocol/record_signature.h). Injected into
// ArtifactStore; a store without one writes unsigned records (tools, tests).

#include <kcache/protocol/record_signature.h>
#include <kcache/storage/artifact_store.h>

#include <functional>
#include <memory>
#include <string>

namespace kcache::storage {

// The fields of `record` a signature covers.
protocol::RecordFields signed_fields(const ActionRecord& record);

class RecordSigner {
public:
  virtual ~RecordSigner() = default;
  RecordSigner() = default;
  RecordSigner(const RecordSigner&) = delete;
  RecordSigner& operator=(const RecordSigner&) = delete;

  // Sets record.ns, then record.signature over the record as it now is.
  virtual void sign(ActionRecord& record) const = 0;
  // Whether a record this node holds may still be served: unsigned (its own,
  // stored before signing) or signed by a key still trusted. A key removed
  // from the trusted set (revoked) takes the node's verified copies with it.
  virtual bool still_trusted(const ActionRecord& record) const = 0;
};

// Signs with `key` (which must outlive it); each record's namespace comes
// from `namespace_of` (kcached: the key's scope, contract.md), "" without one.
// With `trusted`, records signed by a key outside it are no longer served
// (a key id lookup: their signatures were checked when they were read).
class KeyRecordSigner final : public RecordSigner {
public:
  using NamespaceOf = std::function<std::string(const ActionRecord&)>;
  explicit KeyRecordSigner(const protocol::SigningKey& key, NamespaceOf namespace_of = {},
                           std::shared_ptr<const protocol::TrustedKeys> trusted = nullptr);

  void sign(ActionRecord& record) const override;
  bool still_trusted(const ActionRecord& record) const override;

private:
  const protocol::SigningKey& key_;
  NamespaceOf namespace_of_;
  std::shared_ptr<const protocol::TrustedKeys> trusted_;
};

} // namespace kcache::storage
