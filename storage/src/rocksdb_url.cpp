#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_url.h>

namespace kcache::storage {

Result<RocksDbOptions> parse_rocksdb_url(const StoreUrl& url) {
  if (auto ok = url.allow_only({"capacity", "min_blob_size"}); !ok) {
    return tl::unexpected(ok.error());
  }
  RocksDbOptions o;
  o.path = url.path();
  if (o.path.empty()) {
    return url.invalid("needs a directory: rocksdb:///path/to/dir");
  }
  auto capacity = url.size_param("capacity", o.capacity_bytes);
  if (!capacity) {
    return tl::unexpected(capacity.error());
  }
  auto min_blob = url.size_param("min_blob_size", o.min_blob_size);
  if (!min_blob) {
    return tl::unexpected(min_blob.error());
  }
  o.capacity_bytes = *capacity;
  o.min_blob_size = *min_blob;
  return o;
}

} // namespace kcache::storage
