#pragma once
// Stores from URLs, one scheme each (as ccache's remote storage does):
//   memory://?capacity=256MiB
//   rocksdb:///var/lib/kcache?capacity=10GiB&min_blob_size=4096
//   redis://[:password@]host[:port][/db]?namespace=kcache&connect_timeout_ms=200
//          &timeout_ms=500&ttl_s=604800&breaker_failures=3&breaker_open_ms=2000
// RocksDB and Redis stores come wrapped in FramedStore (verified on read).

#include <kcache/storage/store.h>

#include <memory>
#include <span>

namespace kcache::storage {

Result<std::unique_ptr<Store>> make_store(std::string_view url);
// A TieredStore over the URLs, fastest first.
Result<std::unique_ptr<Store>> make_tiered_store(std::span<const std::string> urls);

// "64KiB", "10GiB", "512MB", "1000" -> bytes.
Result<std::uint64_t> parse_size(std::string_view text);

} // namespace kcache::storage
