#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/options.h>

#include <algorithm>
#include <array>
#include <map>

namespace kcache::cachekey {
namespace {

// Flags whose value is the next argument when not attached ("-I dir", "-o f").
constexpr std::array<std::string_view, 9> kPathFlagsWithValue = {
    "-I", "-isystem", "-iquote", "-L", "-o", "-MF", "-MT", "-MQ", "--keep-dir"};
constexpr std::array<std::string_view, 5> kPathFlagPrefixes = {
    "-I", "-isystem", "-L", "-fdebug-prefix-map=", "-ffile-prefix-map="};
constexpr std::array<std::string_view, 7> kDiagnosticFlags = {
    "-w", "-v", "--verbose", "-MD", "-MMD", "-fcolor-diagnostics", "-fno-color-diagnostics"};
constexpr std::array<std::string_view, 5> kDiagnosticPrefixes = {
    "-W", "-ferror-limit=", "-fdiagnostics-", "-fmessage-length=", "--time="};

bool starts_with_any(std::string_view flag, std::span<const std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](std::string_view p) { return flag.starts_with(p); });
}

bool is_one_of(std::string_view flag, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), flag) != names.end();
}

// -Wl, -Wa and -Wp pass options to the linker, assembler and preprocessor:
// they look like warnings but change the output.
bool is_diagnostic(std::string_view flag) {
  if (flag.starts_with("-Wl,") || flag.starts_with("-Wa,") || flag.starts_with("-Wp,")) {
    return false;
  }
  return is_one_of(flag, kDiagnosticFlags) || starts_with_any(flag, kDiagnosticPrefixes);
}

} // namespace

std::vector<std::string> normalize_options(std::span<const std::string> flags) {
  std::vector<std::string> kept;
  std::map<std::string, std::string> defines; // name -> full flag; last wins
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const std::string& flag = flags[i];
    if (is_one_of(flag, kPathFlagsWithValue)) {
      ++i; // the path follows as its own argument
      continue;
    }
    if (starts_with_any(flag, kPathFlagPrefixes) || flag.starts_with("-o") || is_diagnostic(flag)) {
      continue;
    }
    if (flag == "-D" && i + 1 < flags.size()) {
      const std::string& def = flags[++i];
      defines[def.substr(0, def.find('='))] = "-D" + def;
      continue;
    }
    if (flag.starts_with("-D") && flag.size() > 2) {
      defines[flag.substr(2, flag.find('=') - 2)] = flag;
      continue;
    }
    kept.push_back(flag);
  }
  for (auto& [name, flag] : defines) {
    kept.push_back(std::move(flag));
  }
  return kept;
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
