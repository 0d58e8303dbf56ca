#pragma once
// Which namespace a cache key belongs to, for the token scopes (tokens.h).
//
//   kcc-<hex>                 the service's compile keys: no namespace; any
//                             reader may read them, only the service's jobs write
//   kc1-<hex>                 kcache's own keys: the key manifest's `ns` (the
//                             manifest hashes to the key, so it cannot be swapped)
//   <kind>:<namespace>:<rest> kcache.torch's "torch:team-a:..." and the like
//   anything else             namespace "" (only a "*" pattern covers it)

#include <string>
#include <string_view>

namespace kcache::service {

struct KeyScope {
  enum class Kind {
    kCompile,  // kcc-: the service's own
    kManifest, // kc1-: the namespace is in the manifest (stored or uploaded)
    kNamed,    // `ns` below, from the key itself
  };
  Kind kind = Kind::kNamed;
  std::string ns;
};

KeyScope key_scope(std::string_view key);

// Glob match: '*' matches any run of characters ('/' and none included), every
// other character itself.
bool glob_match(std::string_view pattern, std::string_view text);

} // namespace kcache::service
