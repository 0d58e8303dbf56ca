#include <kcache/protocol/url.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/store_url.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace kcache::storage {
namespace {

// [user:]password@host:port -> o.user, o.password, o.host, o.port. Error
// messages name the part that is wrong, never its value (it may be a secret).
Result<void> parse_authority(const StoreUrl& url, RedisOptions& o) {
  std::string_view authority = url.authority();
  // The last '@': a password written with a bare '@' still parses.
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view credentials = authority.substr(0, at);
    const auto colon = credentials.find(':');
    // "secret@host" (no colon) is a password alone, as it always was here.
    const std::string_view user =
        colon == std::string_view::npos ? std::string_view() : credentials.substr(0, colon);
    auto decoded_user = protocol::percent_decode_strict(user);
    auto decoded_password = protocol::percent_decode_strict(
        credentials.substr(colon == std::string_view::npos ? 0 : colon + 1));
    if (!decoded_user) {
      return url.invalid("bad percent-escape in the user name");
    }
    if (!decoded_password) {
      return url.invalid("bad percent-escape in the password");
    }
    o.user = std::move(*decoded_user);
    o.password = std::move(*decoded_password);
    authority = authority.substr(at + 1);
  }
  if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    const auto port = authority.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), o.port);
    if (ec != std::errc() || ptr != port.data() + port.size() || o.port <= 0 || o.port > 65535) {
      return url.invalid("bad port '" + std::string(port) + "'");
    }
    authority = authority.substr(0, colon);
  }
  if (!authority.empty()) {
    o.host = authority;
  }
  return {};
}

// cluster=1 (or 0) and seeds=host:port,host:port.
Result<void> parse_cluster(const StoreUrl& url, RedisOptions& o) {
  if (const auto cluster = url.param("cluster")) {
    if (*cluster != "0" && *cluster != "1") {
      return url.invalid("cluster must be 0 or 1, got '" + *cluster + "'");
    }
    o.cluster = *cluster == "1";
  }
  if (o.cluster && o.db != 0) {
    return url.invalid("a Redis Cluster has only database 0, got /" + std::to_string(o.db));
  }
  const std::string seeds = url.param("seeds").value_or("");
  std::string_view rest = seeds;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view seed = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto colon = seed.rfind(':');
    int port = 0;
    const std::string_view digits =
        colon == std::string_view::npos ? std::string_view() : seed.substr(colon + 1);
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (colon == 0 || colon == std::string_view::npos || ec != std::errc() ||
        ptr != digits.data() + digits.size() || port <= 0 || port > 65535) {
      return url.invalid("seeds must be host:port,host:port, got '" + std::string(seed) + "'");
    }
    o.seeds.emplace_back(seed);
  }
  return {};
}

} // namespace

Result<RedisOptions> parse_redis_url(const StoreUrl& url) {
  if (auto ok = url.allow_only({"namespace", "connect_timeout_ms", "timeout_ms", "ttl_s",
                                "breaker_failures", "breaker_open_ms", "cluster", "seeds"});
      !ok) {
    return tl::unexpected(ok.error());
  }
  if (url.path().find('@') != std::string::npos) {
    // "redis://:pa/ss@host": the password's '/' ended the authority.
    return url.invalid("a '/' in the user or password must be written %2F");
  }
  RedisOptions o;
  if (auto ok = parse_authority(url, o); !ok) {
    return tl::unexpected(ok.error());
  }
  if (url.path().size() > 1) {
    const std::string_view db = std::string_view(url.path()).substr(1);
    const auto [ptr, ec] = std::from_chars(db.data(), db.data() + db.size(), o.db);
    if (ec != std::errc() || ptr != db.data() + db.size()) {
      return url.invalid("path must be a database number, got '" + url.path() + "'");
    }
  }
  o.ns = url.param("namespace").value_or(o.ns);
  // Cluster keys are "<ns>:...{<key>}": a brace in the namespace would become
  // the hash tag and split one job's or lease's keys over several slots.
  if (o.ns.empty() || o.ns.find_first_of("{} \t\r\n") != std::string::npos) {
    return url.invalid("namespace must be non-empty, without braces or whitespace, got '" + o.ns +
                       "'");
  }
  auto connect_ms = url.int_param("connect_timeout_ms", o.connect_timeout.count());
  auto op_ms = url.int_param("timeout_ms", o.op_timeout.count());
  auto ttl = url.int_param("ttl_s", 0);
  auto failures = url.int_param("breaker_failures", o.breaker.failure_threshold);
  auto open_ms = url.int_param("breaker_open_ms", o.breaker.open_for.count());
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
  if (auto ok = parse_cluster(url, o); !ok) {
    return tl::unexpected(ok.error());
  }
  return o;
}

std::string redacted_url(const RedisOptions& o) {
  std::string out = "redis://";
  if (!o.user.empty() || !o.password.empty()) {
    out += o.user + ":***@";
  }
  out += o.host + ":" + std::to_string(o.port) + "/" + std::to_string(o.db);
  return out;
}

} // namespace kcache::storage
