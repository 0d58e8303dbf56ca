#pragma once
// An autotune search read from a JSON file (bench/autotune/*.json), with its
// "source": {"file": ...} inlined as "text" so it can be submitted as is.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace kcache::bench {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The search spec, or nullopt if the file is not a JSON object with "autotune".
inline std::optional<nlohmann::json> load_search_file(const std::filesystem::path& path) {
  nlohmann::json spec = nlohmann::json::parse(read_file(path), nullptr, false);
  if (!spec.is_object() || !spec.contains("autotune")) {
    return std::nullopt;
  }
  if (spec.contains("source") && spec["source"].contains("file")) {
    spec["source"]["text"] =
        read_file(path.parent_path() / spec["source"]["file"].get<std::string>());
    spec["source"].erase("file");
  }
  return spec;
}

} // namespace kcache::bench
