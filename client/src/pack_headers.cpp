#include <kcache/cachekey/compiler_flags.h>
#include <kcache/cachekey/source_includes.h>
#include <kcache/client/pack_headers.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace kcache::client {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

tl::unexpected<ClientError> invalid(const std::string& message) {
  return tl::unexpected(ClientError{ErrorCode::kInvalid, 0, "pack_headers: " + message});
}

// Where the compiler looks for a header, in order (clang's and NVRTC's rules).
struct SearchPath {
  std::vector<fs::path> quote_only; // -iquote: quoted includes only
  std::vector<fs::path> angled;     // -I, -isystem, -idirafter, then PackOptions::include_dirs
};

// Takes the include-dir flags out of `options` into `search`; every other
// flag keeps the tokens it was written with.
Result<std::vector<std::string>> take_include_dirs(cachekey::FlagFamily family,
                                                   const std::vector<std::string>& options,
                                                   const PackOptions& pack, SearchPath& search) {
  auto flags = cachekey::parse_flags(family, options);
  if (!flags) {
    return invalid("options: " + flags.error().message);
  }
  std::vector<fs::path> plain, system, after;
  std::vector<std::string> kept;
  for (const cachekey::Flag& f : *flags) {
    std::vector<fs::path>* into = nullptr;
    if (f.name == "-I" || f.name == "--include-path") {
      into = &plain;
    } else if (f.name == "-iquote") {
      into = &search.quote_only;
    } else if (f.name == "-isystem") {
      into = &system;
    } else if (f.name == "-idirafter" || f.name == "-isystem-after") {
      into = &after;
    }
    if (into != nullptr && f.has_value) {
      into->emplace_back(f.value);
    } else {
      kept.insert(kept.end(), f.tokens.begin(), f.tokens.end());
    }
  }
  for (auto* group : {&plain, &system, &after}) {
    search.angled.insert(search.angled.end(), group->begin(), group->end());
  }
  search.angled.insert(search.angled.end(), pack.include_dirs.begin(), pack.include_dirs.end());
  return kept;
}

struct Pending {
  std::string name;
  std::string text;
  std::optional<fs::path> path; // on disk; none for what the spec already carries
};

// What a name stands for: a file packed from disk, a header the spec carries,
// or nothing found (a toolchain header, left to the worker).
struct Resolved {
  enum class Kind { kPacked, kCarried, kToolchain } kind = Kind::kToolchain;
  fs::path path;
  std::string text;
};

std::string describe(const cachekey::IncludeRef& ref, const std::string& file) {
  const std::string written = ref.angled ? "<" + ref.name + ">" : "\"" + ref.name + "\"";
  return "#include " + written + " in " + file + ":" + std::to_string(ref.line);
}

class Packer {
public:
  Packer(const SearchPath& search, const PackOptions& limits, json& headers)
      : search_(search), limits_(limits), headers_(headers) {}

  Result<void> run(Pending source) {
    for (const json& h : headers_) {
      const std::string name = h.at("name").get<std::string>();
      names_[name] = Resolved{Resolved::Kind::kCarried, {}, {}};
      queue_.push_back({name, h.at("text").get<std::string>(), std::nullopt});
    }
    queue_.push_front(std::move(source));
    while (!queue_.empty()) {
      const Pending file = std::move(queue_.front());
      queue_.pop_front();
      if (auto ok = follow(file); !ok) {
        return ok;
      }
    }
    return {};
  }

private:
  Result<void> follow(const Pending& file) {
    auto refs = cachekey::scan_includes(file.name, file.text);
    if (!refs) {
      return invalid(refs.error() + (file.path ? " (in " + file.path->string() + ")" : ""));
    }
    std::set<std::pair<std::string, bool>> seen;
    for (const cachekey::IncludeRef& ref : *refs) {
      if (!seen.emplace(ref.name, ref.angled).second) {
        continue;
      }
      if (auto ok = cachekey::check_relative_name(ref.name); !ok) {
        return invalid(describe(ref, file.name) + ": " + ok.error());
      }
      if (auto ok = include(ref, file); !ok) {
        return ok;
      }
    }
    return {};
  }

  Result<void> include(const cachekey::IncludeRef& ref, const Pending& from) {
    using Kind = Resolved::Kind;
    const auto known = names_.find(ref.name);
    if (known != names_.end() && known->second.kind == Kind::kCarried) {
      return {};
    }
    const std::optional<fs::path> path = find(ref, from);
    if (known != names_.end() && !path && known->second.kind == Kind::kToolchain) {
      return {};
    }
    std::error_code ec;
    if (known != names_.end() && path && fs::canonical(*path, ec) == known->second.path) {
      return {};
    }
    Resolved now;
    if (path) {
      auto read_now = read(*path, ref, from);
      if (!read_now) {
        return tl::unexpected(read_now.error());
      }
      now = std::move(*read_now);
    }
    if (known != names_.end()) {
      return same_file(known->second, now, ref, from);
    }
    if (now.kind == Kind::kPacked) {
      if (++files_ > limits_.max_files) {
        return invalid("more than " + std::to_string(limits_.max_files) + " headers to pack (at " +
                       now.path.string() + ")");
      }
      bytes_ += now.text.size();
      headers_.push_back(json{{"name", ref.name}, {"text", now.text}});
      queue_.push_back({ref.name, now.text, *path});
    }
    names_.emplace(ref.name, std::move(now));
    return {};
  }

  // One name must mean one file everywhere: the worker has a single header
  // under it (or none, for a toolchain header). The same text under two
  // paths (a copy) is the same header.
  static Result<void> same_file(const Resolved& before, const Resolved& now,
                                const cachekey::IncludeRef& ref, const Pending& from) {
    using Kind = Resolved::Kind;
    if (before.kind == Kind::kPacked && now.kind == Kind::kPacked && before.text == now.text) {
      return {};
    }
    auto where = [](const Resolved& r) {
      return r.kind == Kind::kPacked ? r.path.string()
                                     : std::string("no file (a toolchain header)");
    };
    return invalid(describe(ref, from.name) + " finds " + where(now) + ", but '" + ref.name +
                   "' is " + where(before) +
                   " for another include; a spec holds one header per name");
  }

  // The first file the compiler would open for `ref` included from `from`.
  std::optional<fs::path> find(const cachekey::IncludeRef& ref, const Pending& from) const {
    std::vector<fs::path> dirs;
    if (!ref.angled) {
      if (from.path) {
        dirs.push_back(from.path->parent_path());
      }
      dirs.insert(dirs.end(), search_.quote_only.begin(), search_.quote_only.end());
    }
    dirs.insert(dirs.end(), search_.angled.begin(), search_.angled.end());
    for (const fs::path& dir : dirs) {
      std::error_code ec;
      if (fs::path candidate = dir / ref.name; fs::is_regular_file(candidate, ec)) {
        return candidate;
      }
    }
    return std::nullopt;
  }

  Result<Resolved> read(const fs::path& path, const cachekey::IncludeRef& ref,
                        const Pending& from) const {
    std::error_code ec;
    const fs::path canonical = fs::canonical(path, ec);
    const std::uintmax_t size = ec ? 0 : fs::file_size(path, ec);
    if (ec) {
      return invalid("cannot read " + path.string() + " (" + describe(ref, from.name) +
                     "): " + ec.message());
    }
    // Checked before reading, so a huge file is never loaded.
    if (size >
        limits_.max_total_bytes - std::min<std::uintmax_t>(bytes_, limits_.max_total_bytes)) {
      return invalid("the headers to pack exceed " + std::to_string(limits_.max_total_bytes) +
                     " bytes (at " + path.string() + ")");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return invalid("cannot read " + path.string() + " (" + describe(ref, from.name) +
                     "): " + std::strerror(errno));
    }
    Resolved r{Resolved::Kind::kPacked, canonical,
               std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())};
    try {
      (void)json(r.text).dump(); // a spec is JSON: its texts must be UTF-8
    } catch (const json::exception&) {
      return invalid(path.string() + " is not UTF-8 text (" + describe(ref, from.name) + ")");
    }
    return r;
  }

  const SearchPath& search_;
  const PackOptions& limits_;
  json& headers_;
  std::map<std::string, Resolved> names_;
  std::deque<Pending> queue_;
  std::size_t files_ = 0;
  std::uintmax_t bytes_ = 0;
};

Result<json> parse_spec(std::string_view spec_json) {
  json doc = protocol::parse_json_or_discarded(spec_json);
  if (doc.is_discarded() || !doc.is_object()) {
    return invalid("the spec is not a JSON object");
  }
  const auto source = doc.find("source");
  if (source == doc.end() || !source->is_object() || !source->value("name", json()).is_string() ||
      !source->value("text", json()).is_string()) {
    return invalid("the spec needs \"source\": {\"name\", \"text\"}");
  }
  if (!doc.value("headers", json::array()).is_array() ||
      !doc.value("options", json::array()).is_array()) {
    return invalid("\"headers\" and \"options\" must be arrays");
  }
  for (const json& h : doc.value("headers", json::array())) {
    if (!h.is_object() || !h.value("name", json()).is_string() ||
        !h.value("text", json()).is_string()) {
      return invalid("each header needs a string \"name\" and \"text\"");
    }
  }
  for (const json& o : doc.value("options", json::array())) {
    if (!o.is_string()) {
      return invalid("options must be strings");
    }
  }
  return doc;
}

} // namespace

Result<std::string> pack_headers(std::string_view spec_json, const PackOptions& options) {
  try {
    auto doc = parse_spec(spec_json);
    if (!doc) {
      return tl::unexpected(doc.error());
    }
    const std::string backend = doc->value("backend", "");
    if (backend != "cuda" && backend != "cpp") {
      return std::string(spec_json); // IR and PTX include nothing; kcached judges the rest
    }
    const auto family =
        backend == "cuda" ? cachekey::FlagFamily::kNvrtc : cachekey::FlagFamily::kClang;
    SearchPath search;
    const auto written = doc->value("options", std::vector<std::string>{});
    auto kept = take_include_dirs(family, written, options, search);
    if (!kept) {
      return tl::unexpected(kept.error());
    }
    if (kept->size() != written.size()) {
      (*doc)["options"] = std::move(*kept);
    }
    if (!doc->contains("headers")) {
      (*doc)["headers"] = json::array();
    }
    const json& source = (*doc)["source"];
    Packer packer(search, options, (*doc)["headers"]);
    if (auto ok = packer.run({source["name"], source["text"], std::nullopt}); !ok) {
      return tl::unexpected(ok.error());
    }
    return doc->dump();
  } catch (const std::exception& e) {
    return invalid(e.what()); // json or filesystem trouble not caught above
  }
}

} // namespace kcache::client
