#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/options.h>

namespace kcache::cachekey {

std::vector<std::string> normalize_options(std::span<const std::string> flags) {
  // The generic family keeps what it does not understand: parsing cannot fail.
  auto parsed = parse_flags(FlagFamily::kGeneric, flags);
  return parsed ? render_flags(*parsed, /*for_key=*/true)
                : std::vector<std::string>(flags.begin(), flags.end());
}

tl::expected<std::vector<std::string>, FlagError>
normalize_options(FlagFamily family, std::span<const std::string> flags) {
  auto parsed = parse_flags(family, flags);
  if (!parsed) {
    return tl::unexpected(parsed.error());
  }
  return render_flags(*parsed, /*for_key=*/true);
}

Digest options_digest(std::span<const std::string> normalized_flags) {
  CanonicalWriter w;
  w.tag("options").list(normalized_flags.size());
  for (const std::string& flag : normalized_flags) {
    w.str(flag);
  }
  return w.sha256();
}

} // namespace kcache::cachekey
