#pragma once
// Compile options as the key sees them: parsed per compiler family with their
// arguments (compiler_flags.h), in canonical spelling, with -D/-U resolved to
// the final macro table. Only dependency files (-MD, -MF x) and the output
// path (-o x) are left out; warning flags stay (-Wno-deprecated changes a
// macro). Everything else keeps its relative order; a flag the family's table
// does not know is kept verbatim with its argument, never dropped.

#include <kcache/cachekey/compiler_flags.h>
#include <kcache/cachekey/sha256.h>

#include <span>
#include <string>
#include <vector>

namespace kcache::cachekey {

// Flags of any compiler, as a client hashes them into its own key. Never fails.
std::vector<std::string> normalize_options(std::span<const std::string> flags);
// Flags of one family; unknown flags are an error for kNvrtc and kClang.
tl::expected<std::vector<std::string>, FlagError>
normalize_options(FlagFamily family, std::span<const std::string> flags);

Digest options_digest(std::span<const std::string> normalized_flags);

} // namespace kcache::cachekey
