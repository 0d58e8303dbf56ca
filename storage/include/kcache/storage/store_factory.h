#pragma once
// Stores from URLs, one scheme each (as ccache's remote storage does); each
// scheme's parser (parse_*_url) refuses parameters it does not know:
//   memory://?capacity=256MiB
//   rocksdb:///var/lib/kcache?capacity=10GiB&min_blob_size=4096
//   redis://[:password@]host[:port][/db]?namespace=kcache&connect_timeout_ms=200
//          &timeout_ms=500&ttl_s=604800&breaker_failures=3&breaker_open_ms=2000
// Every tier comes counted (CountingStore); RocksDB and Redis tiers also come
// framed (FramedStore, verified on read) over the count, so their byte
// counters are bytes as stored.

#include <kcache/storage/signature_checking_store.h>
#include <kcache/storage/store.h>
#include <kcache/storage/store_url.h>
#include <kcache/storage/value_frame.h>

#include <memory>
#include <span>

namespace kcache::storage {

// Limits every tier shares, configured in one place (kcached: from its
// [limits] section) rather than per URL.
struct StoreLimits {
  // The largest value a tier keeps; a framed value claiming more is corrupt.
  std::uint64_t max_value_bytes = kDefaultMaxValueSize;
};

Result<std::unique_ptr<Store>> make_store(std::string_view url, const StoreLimits& limits = {});

// What the daemon serves from: a counted TieredStore over the URLs' tiers.
struct TieredStack {
  std::unique_ptr<Store> store;
  std::vector<Store*> tiers; // as make_store made them, fastest first; owned by `store`
};
// Fastest first; at least one URL. A put is acknowledged only once the durable
// tier took it: the last RocksDB tier, else the last tier (tiered_store.h).
// With `signatures`, every tier other nodes can write (all but memory and
// RocksDB: Redis) serves only action records signed by a trusted key
// (signature_checking_store.h).
Result<TieredStack> make_tiered_store(std::span<const std::string> urls,
                                      const StoreLimits& limits = {},
                                      const SignatureCheck* signatures = nullptr);

} // namespace kcache::storage
