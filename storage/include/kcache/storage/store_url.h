#pragma once
// A store URL split into its parts, scheme://[authority][/path][?name=value&...],
// for the scheme parsers (memory_store.h, rocksdb_store.h, redis_store.h).
// A parser first names the parameters its scheme takes (allow_only), so a
// misspelt one is refused with its name instead of silently ignored.

#include <kcache/storage/store.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kcache::storage {

class StoreUrl {
public:
  // Refuses text without "scheme://", a parameter without '=', or one given twice.
  static Result<StoreUrl> parse(std::string_view text);

  const std::string& scheme() const { return scheme_; }
  const std::string& authority() const { return authority_; } // [user:password@]host[:port]
  const std::string& path() const { return path_; }           // "" or starting with '/'

  // An error naming every parameter not in `known` (and what the scheme takes).
  Result<void> allow_only(std::initializer_list<std::string_view> known) const;

  std::optional<std::string> param(std::string_view name) const;
  // A size ("64KiB", "10GiB", "1000"), or `fallback` when absent.
  Result<std::uint64_t> size_param(std::string_view name, std::uint64_t fallback) const;
  // A non-negative integer, or `fallback` when absent.
  Result<std::int64_t> int_param(std::string_view name, std::int64_t fallback) const;

  // A kInvalidArgument error that starts with the scheme (never the whole
  // URL: a Redis URL may carry a password).
  tl::unexpected<StoreError> invalid(std::string_view message) const;

private:
  std::string scheme_;
  std::string authority_;
  std::string path_;
  std::map<std::string, std::string, std::less<>> query_;
};

// "64KiB", "10GiB", "512MB", "1000" -> bytes.
Result<std::uint64_t> parse_size(std::string_view text);

} // namespace kcache::storage
