#include <kcache/storage/memory_store.h>
#include <kcache/storage/store_url.h>

namespace kcache::storage {

Result<MemoryOptions> parse_memory_url(const StoreUrl& url) {
  if (auto ok = url.allow_only({"capacity"}); !ok) {
    return tl::unexpected(ok.error());
  }
  if (!url.authority().empty() || !url.path().empty()) {
    return url.invalid("takes no host or path (memory://?capacity=256MiB)");
  }
  MemoryOptions o;
  auto capacity = url.size_param("capacity", o.capacity_bytes);
  if (!capacity) {
    return tl::unexpected(capacity.error());
  }
  o.capacity_bytes = *capacity;
  return o;
}

} // namespace kcache::storage
