#include <kcache/storage/record_signer.h>

namespace kcache::storage {

protocol::RecordFields signed_fields(const ActionRecord& record) {
  protocol::RecordFields f{.key = record.key,
                           .ns = record.ns,
                           .writer = record.writer,
                           .producer = record.producer,
                           .created_ms = record.created_ms,
                           .outputs = {},
                           .metadata = record.metadata};
  f.outputs.reserve(record.outputs.size());
  for (const OutputRef& o : record.outputs) {
    f.outputs.push_back({o.name, o.digest, o.size});
  }
  return f;
}

KeyRecordSigner::KeyRecordSigner(const protocol::SigningKey& key, NamespaceOf namespace_of,
                                 std::shared_ptr<const protocol::TrustedKeys> trusted)
    : key_(key), namespace_of_(std::move(namespace_of)), trusted_(std::move(trusted)) {}

void KeyRecordSigner::sign(ActionRecord& record) const {
  record.ns = namespace_of_ ? namespace_of_(record) : std::string();
  record.signature = key_.sign(signed_fields(record));
}

bool KeyRecordSigner::still_trusted(const ActionRecord& record) const {
  return !record.signature || record.signature->key_id == key_.key_id() || !trusted_ ||
         trusted_->contains(record.signature->key_id);
}

} // namespace kcache::storage
