#pragma once
// Compile option normalization. Only flags that can change the produced binary
// reach the key:
//   - diagnostics-only flags are dropped (-W*, -w, -v, --verbose, -ferror-limit=,
//     -fdiagnostics-*, -fcolor-diagnostics, -Werror, --time=...);
//   - path-only flags are dropped (-I/-isystem/-L paths, -o, -MF/-MD/-MT,
//     --keep-dir, -fdebug-prefix-map=): the *contents* those paths provide are
//     hashed as sources, never where they live;
//   - defines (-DNAME[=V]) are sorted by name, the last definition winning;
//   - every other flag keeps its relative order.

#include <kcache/cachekey/sha256.h>

#include <span>
#include <string>
#include <vector>

namespace kcache::cachekey {

std::vector<std::string> normalize_options(std::span<const std::string> flags);
Digest options_digest(std::span<const std::string> normalized_flags);

} // namespace kcache::cachekey
