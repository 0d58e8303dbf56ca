#include <kcache/protocol/did_you_mean.h>

#include <algorithm>
#include <vector>

namespace kcache::protocol {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the full table: the swap looks two rows back.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    previous[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates) {
  std::string_view best;
  std::size_t best_distance = 0;
  for (const std::string_view candidate : candidates) {
    const std::size_t d = edit_distance(word, candidate);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // A third of the word wrong is a different word, not a typo.
  return !best.empty() && best_distance * 3 <= std::max<std::size_t>(word.size(), 3) ? best : "";
}

std::optional<std::string> unknown_field(const nlohmann::json& object,
                                         std::span<const std::string_view> known,
                                         std::string_view where) {
  if (!object.is_object()) {
    return std::nullopt;
  }
  for (const auto& [name, value] : object.items()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) {
      continue;
    }
    std::string message = std::string(where) + ": unknown field '" + name + "' (";
    if (const std::string_view near = closest_name(name, known); !near.empty()) {
      message += "did you mean '" + std::string(near) + "'? ";
    }
    message += "valid:";
    for (std::size_t i = 0; i < known.size(); ++i) {
      message += (i == 0 ? " " : ", ") + std::string(known[i]);
    }
    return message + ")";
  }
  return std::nullopt;
}

} // namespace kcache::protocol
