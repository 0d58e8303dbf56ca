#pragma once
// Signs the action records an ArtifactStore writes (issue 14): the node's
// Ed25519 key over the record's key, namespace, writer, producer, time,
// outputs and metadata (protocol/record_signature.h). Injected into
// ArtifactStore; a store without one writes unsigned records (tools, tests).

#include <kcache/protocol/record_signature.h>
#include <kcache/storage/artifact_store.h>

#include <functional>
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
};

// Signs with `key` (which must outlive it); each record's namespace comes
// from `namespace_of` (kcached: the key's scope, contract.md), "" without one.
class KeyRecordSigner final : public RecordSigner {
public:
  using NamespaceOf = std::function<std::string(const ActionRecord&)>;
  explicit KeyRecordSigner(const protocol::SigningKey& key, NamespaceOf namespace_of = {});

  void sign(ActionRecord& record) const override;

private:
  const protocol::SigningKey& key_;
  NamespaceOf namespace_of_;
};

} // namespace kcache::storage
