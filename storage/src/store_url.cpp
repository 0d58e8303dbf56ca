#include <kcache/protocol/units.h>
#include <kcache/storage/store_url.h>

#include <algorithm>
#include <charconv>

namespace kcache::storage {
namespace {

tl::unexpected<StoreError> invalid_argument(std::string message) {
  return tl::unexpected(StoreError{StoreError::Code::kInvalidArgument, std::move(message)});
}

// What comes before an '@' may be a password (an unescaped '?' in it puts
// it in the query): errors show "***" instead.
std::string without_userinfo(std::string_view text) {
  const auto at = text.rfind('@');
  return at == std::string_view::npos ? std::string(text) : "***" + std::string(text.substr(at));
}

} // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  auto size = protocol::parse_size(text);
  if (!size) {
    return invalid_argument(size.error());
  }
  return *size;
}

Result<StoreUrl> StoreUrl::parse(std::string_view text) {
  StoreUrl url;
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) {
    return invalid_argument("store URL '" + without_userinfo(text) +
                            "' has no scheme (expected scheme://...)");
  }
  url.scheme_ = text.substr(0, sep);
  std::string_view rest = text.substr(sep + 3);
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const auto amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos) {
        return url.invalid("parameter '" + without_userinfo(pair) + "' has no value");
      }
      const std::string_view name = pair.substr(0, eq);
      if (!url.query_.emplace(std::string(name), std::string(pair.substr(eq + 1))).second) {
        return url.invalid("parameter '" + std::string(name) + "' is given twice");
      }
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
  }
  const auto slash = rest.find('/');
  url.authority_ = rest.substr(0, slash);
  url.path_ = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  return url;
}

tl::unexpected<StoreError> StoreUrl::invalid(std::string_view message) const {
  return invalid_argument(scheme_ + " store URL: " + std::string(message));
}

Result<void> StoreUrl::allow_only(std::initializer_list<std::string_view> known) const {
  std::string unknown;
  for (const auto& [name, value] : query_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      unknown += (unknown.empty() ? "'" : ", '") + name + "'";
    }
  }
  if (unknown.empty()) {
    return {};
  }
  std::string takes;
  for (const std::string_view name : known) {
    takes += (takes.empty() ? "" : ", ") + std::string(name);
  }
  return invalid("unknown parameter " + unknown + " (" + scheme_ + " takes " +
                 (takes.empty() ? "none" : takes) + ")");
}

std::optional<std::string> StoreUrl::param(std::string_view name) const {
  const auto it = query_.find(name);
  return it == query_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

Result<std::uint64_t> StoreUrl::size_param(std::string_view name, std::uint64_t fallback) const {
  const auto it = query_.find(name);
  if (it == query_.end()) {
    return fallback;
  }
  auto size = parse_size(it->second);
  if (!size) {
    return invalid(std::string(name) + ": " + size.error().message);
  }
  return *size;
}

Result<std::int64_t> StoreUrl::int_param(std::string_view name, std::int64_t fallback) const {
  const auto it = query_.find(name);
  if (it == query_.end()) {
    return fallback;
  }
  std::int64_t value = 0;
  const std::string& text = it->second;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < 0) {
    return invalid("parameter " + std::string(name) + "='" + text +
                   "' is not a non-negative integer");
  }
  return value;
}

} // namespace kcache::storage
