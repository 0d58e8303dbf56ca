#include <kcache/service/key_namespace.h>

#include <algorithm>

namespace kcache::service {

namespace {

bool is_kind_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

} // namespace

KeyScope key_scope(std::string_view key) {
  if (key.starts_with("kcc-")) {
    return {KeyScope::Kind::kCompile, {}};
  }
  if (key.starts_with("kc1-")) {
    return {KeyScope::Kind::kManifest, {}};
  }
  // <kind>:<namespace>:<rest>, the kind lowercase.
  const auto first = key.find(':');
  if (first == std::string_view::npos || first == 0 ||
      !std::all_of(key.begin(), key.begin() + static_cast<std::ptrdiff_t>(first), is_kind_char) ||
      !(key[0] >= 'a' && key[0] <= 'z')) {
    return {KeyScope::Kind::kNamed, {}};
  }
  const auto second = key.find(':', first + 1);
  if (second == std::string_view::npos) {
    return {KeyScope::Kind::kNamed, {}};
  }
  return {KeyScope::Kind::kNamed, std::string(key.substr(first + 1, second - first - 1))};
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative, with one backtrack point per '*': linear in practice, and no
  // pattern makes it exponential (each '*' resumes from the last one only).
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

} // namespace kcache::service
