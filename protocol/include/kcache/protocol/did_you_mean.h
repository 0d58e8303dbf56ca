#pragma once
// Names a typo's likely meaning: for unknown flags (kcache, kcached), TOML
// keys and JSON fields of a request (compile specs, autotune searches).
// Written here rather than taken from a library: CLI11 2.1 suggests nothing,
// and the few lines below serve the TOML and JSON readers too.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kcache::protocol {

// Restricted Damerau-Levenshtein distance: a swap of two neighbouring letters
// (--repiar for --repair) counts as one edit.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, or "" when none is close enough to be a
// typo of it (more than a third of the word would have to change).
std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates);

// For a JSON object of a request: the first member not among `known`, as an
// error such as "compile spec: unknown field 'opitons' (did you mean
// 'options'? valid: backend, source, ...)". A member is refused rather than
// ignored: dropping what a client meant to send (a mistyped "options") would
// compile something other than what it asked for. Not an object: nullopt.
std::optional<std::string> unknown_field(const nlohmann::json& object,
                                         std::span<const std::string_view> known,
                                         std::string_view where);

} // namespace kcache::protocol
