#include <kcache/cachekey/units.h>
#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/store_factory.h>
#include <kcache/storage/tiered_store.h>

#include <charconv>
#include <map>

namespace kcache::storage {
namespace {

tl::unexpected<StoreError> invalid(std::string message) {
  return tl::unexpected(StoreError{StoreError::Code::kInvalidArgument, std::move(message)});
}

struct Url {
  std::string scheme;
  std::string authority; // user:pass@host:port
  std::string path;
  std::map<std::string, std::string, std::less<>> query;
};

Result<Url> parse_url(std::string_view text) {
  Url url;
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) {
    return invalid("store URL '" + std::string(text) + "' has no scheme (expected scheme://...)");
  }
  url.scheme = text.substr(0, sep);
  std::string_view rest = text.substr(sep + 3);
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos) {
        return invalid("store URL parameter '" + std::string(pair) + "' has no value");
      }
      url.query.emplace(std::string(pair.substr(0, eq)), std::string(pair.substr(eq + 1)));
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
  }
  const auto slash = rest.find('/');
  url.authority = rest.substr(0, slash);
  url.path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  return url;
}

Result<std::int64_t> parse_int(const Url& url, std::string_view name, std::int64_t fallback) {
  const auto it = url.query.find(name);
  if (it == url.query.end()) {
    return fallback;
  }
  std::int64_t value = 0;
  const auto [ptr, ec] =
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  if (ec != std::errc() || ptr != it->second.data() + it->second.size() || value < 0) {
    return invalid("store URL parameter " + std::string(name) + "='" + it->second +
                   "' is not a non-negative integer");
  }
  return value;
}

Result<std::uint64_t> size_param(const Url& url, std::string_view name, std::uint64_t fallback) {
  const auto it = url.query.find(name);
  return it == url.query.end() ? Result<std::uint64_t>(fallback) : parse_size(it->second);
}

Result<std::unique_ptr<Store>> make_redis(const Url& url) {
  RedisOptions o;
  std::string_view authority = url.authority;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view credentials = authority.substr(0, at);
    o.password = credentials.substr(
        credentials.find(':') == std::string_view::npos ? 0 : credentials.find(':') + 1);
    authority = authority.substr(at + 1);
  }
  if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    const auto port = authority.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), o.port);
    if (ec != std::errc() || ptr != port.data() + port.size() || o.port <= 0 || o.port > 65535) {
      return invalid("redis URL has a bad port '" + std::string(port) + "'");
    }
    authority = authority.substr(0, colon);
  }
  if (!authority.empty()) {
    o.host = authority;
  }
  if (url.path.size() > 1) {
    const std::string_view db = std::string_view(url.path).substr(1);
    const auto [ptr, ec] = std::from_chars(db.data(), db.data() + db.size(), o.db);
    if (ec != std::errc() || ptr != db.data() + db.size()) {
      return invalid("redis URL path must be a database number, got '" + url.path + "'");
    }
  }
  if (const auto ns = url.query.find("namespace"); ns != url.query.end()) {
    o.ns = ns->second;
  }
  auto connect_ms = parse_int(url, "connect_timeout_ms", o.connect_timeout.count());
  auto op_ms = parse_int(url, "timeout_ms", o.op_timeout.count());
  auto ttl = parse_int(url, "ttl_s", 0);
  auto failures = parse_int(url, "breaker_failures", o.breaker.failure_threshold);
  auto open_ms = parse_int(url, "breaker_open_ms", o.breaker.open_for.count());
  for (const auto* r : {&connect_ms, &op_ms, &ttl, &failures, &open_ms}) {
    if (!*r) {
      return tl::unexpected(r->error());
    }
  }
  o.connect_timeout = std::chrono::milliseconds(*connect_ms);
  o.op_timeout = std::chrono::milliseconds(*op_ms);
  if (*ttl > 0) {
    o.ttl = std::chrono::seconds(*ttl);
  }
  o.breaker.failure_threshold = static_cast<int>(std::max<std::int64_t>(1, *failures));
  o.breaker.open_for = std::chrono::milliseconds(*open_ms);
  return std::make_unique<FramedStore>(std::make_unique<RedisStore>(std::move(o)));
}

Result<std::unique_ptr<Store>> make_rocksdb(const Url& url) {
  RocksDbOptions o;
  o.path = url.path;
  if (o.path.empty()) {
    return invalid("rocksdb URL needs a directory: rocksdb:///path/to/dir");
  }
  auto capacity = size_param(url, "capacity", o.capacity_bytes);
  auto min_blob = size_param(url, "min_blob_size", o.min_blob_size);
  if (!capacity) {
    return tl::unexpected(capacity.error());
  }
  if (!min_blob) {
    return tl::unexpected(min_blob.error());
  }
  o.capacity_bytes = *capacity;
  o.min_blob_size = *min_blob;
  auto store = RocksDbStore::open(o);
  if (!store) {
    return tl::unexpected(store.error());
  }
  return std::make_unique<FramedStore>(std::move(*store));
}

} // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  auto size = cachekey::parse_size(text);
  if (!size) {
    return invalid(size.error());
  }
  return *size;
}

Result<std::unique_ptr<Store>> make_store(std::string_view text) {
  auto url = parse_url(text);
  if (!url) {
    return tl::unexpected(url.error());
  }
  if (url->scheme == "memory") {
    auto capacity = size_param(*url, "capacity", 256ULL << 20);
    if (!capacity) {
      return tl::unexpected(capacity.error());
    }
    return std::make_unique<MemoryStore>(*capacity);
  }
  if (url->scheme == "rocksdb") {
    return make_rocksdb(*url);
  }
  if (url->scheme == "redis") {
    return make_redis(*url);
  }
  return invalid("unknown store scheme '" + url->scheme + "' (memory, rocksdb, redis)");
}

Result<std::unique_ptr<Store>> make_tiered_store(std::span<const std::string> urls) {
  std::vector<std::unique_ptr<Store>> tiers;
  for (const std::string& url : urls) {
    auto store = make_store(url);
    if (!store) {
      return tl::unexpected(store.error());
    }
    tiers.push_back(std::move(*store));
  }
  return std::make_unique<TieredStore>(std::move(tiers));
}

} // namespace kcache::storage
