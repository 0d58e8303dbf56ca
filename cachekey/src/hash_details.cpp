#include <kcache/cachekey/hash_details.h>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace kcache::cachekey {
namespace {

// Values such as a whole graph's code run to kilobytes; explain shows a head.
constexpr std::size_t kShownValueChars = 160;

// One line per value: Inductor's texts of graphs span many lines.
std::string shown(const std::string& value) {
  std::string line;
  bool in_space = false;
  for (const char c : value) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && !in_space && !line.empty()) {
      line += ' ';
    } else if (!space) {
      line += c;
    }
    in_space = space;
  }
  if (line.size() <= kShownValueChars) {
    return line;
  }
  return line.substr(0, kShownValueChars) + "... (" + std::to_string(value.size()) + " chars)";
}

const HashDetail* find_field(const std::vector<HashDetail>& details, const std::string& field) {
  const auto it = std::find_if(details.begin(), details.end(),
                               [&](const HashDetail& d) { return d.field == field; });
  return it == details.end() ? nullptr : &*it;
}

} // namespace

std::vector<HashDetail> parse_hash_details(const std::vector<std::string>& lines) {
  std::vector<HashDetail> out;
  out.reserve(lines.size());
  for (const std::string& line : lines) {
    const std::size_t close = line.find("] ");
    const std::size_t colon = close == std::string::npos ? close : line.find(": ", close + 2);
    if (line.empty() || line.front() != '[' || colon == std::string::npos) {
      out.push_back(HashDetail{line, "", ""});
      continue;
    }
    out.push_back(HashDetail{line.substr(close + 2, colon - close - 2), line.substr(1, close - 1),
                             line.substr(colon + 2)});
  }
  return out;
}

Explanation explain_hash_details(std::string key_a, const std::vector<HashDetail>& a,
                                 std::string key_b, const std::vector<HashDetail>& b) {
  Explanation e{std::move(key_a), std::move(key_b), {}};
  for (const HashDetail& da : a) {
    const HashDetail* db = find_field(b, da.field);
    if (db == nullptr) {
      e.diffs.push_back(ComponentDiff{da.field, da.value, "", {"only in A: " + shown(da.value)}});
    } else if (db->hash != da.hash || (da.hash.empty() && db->value != da.value)) {
      e.diffs.push_back(ComponentDiff{
          da.field,
          da.value,
          db->value,
          {"A [" + da.hash + "] " + shown(da.value), "B [" + db->hash + "] " + shown(db->value)}});
    }
  }
  for (const HashDetail& db : b) {
    if (find_field(a, db.field) == nullptr) {
      e.diffs.push_back(ComponentDiff{db.field, "", db.value, {"only in B: " + shown(db.value)}});
    }
  }
  return e;
}

} // namespace kcache::cachekey
