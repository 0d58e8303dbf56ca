#include "compiler_flag_tables.h"

#include <kcache/cachekey/compiler_flags.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

namespace kcache::cachekey {
namespace {

using flags::ArgForm;
using flags::FlagSpec;

struct Match {
  const FlagSpec* spec = nullptr;
  std::string value;
  bool has_value = false;
  bool takes_next = false; // the value is the next argument
};

// "-D" style names glue their value ("-DX"); long names take "=" ("--std=x").
bool is_short(std::string_view spelling) {
  return spelling.size() == 2 && spelling[0] == '-' && spelling[1] != '-';
}

std::optional<Match> match(const FlagSpec& spec, std::string_view name, std::string_view token) {
  Match m{&spec, {}, false, false};
  switch (spec.form) {
  case ArgForm::kNone:
    if (token == name) {
      return m;
    }
    return std::nullopt;
  case ArgForm::kSeparate:
    if (token == name) {
      m.has_value = m.takes_next = true;
      return m;
    }
    return std::nullopt;
  case ArgForm::kJoined:
    if (token.starts_with(name)) {
      m.value = std::string(token.substr(name.size()));
      m.has_value = !m.value.empty();
      return m;
    }
    return std::nullopt;
  case ArgForm::kEquals:
  case ArgForm::kJoinedOrSeparate:
    if (token == name) {
      m.has_value = m.takes_next = true;
      return m;
    }
    // "-D=X" defines "=X", as clang reads it: a short name glues its value.
    if (spec.form == ArgForm::kJoinedOrSeparate && is_short(name) && token.starts_with(name)) {
      m.value = std::string(token.substr(name.size()));
      m.has_value = true;
      return m;
    }
    if (token.starts_with(name) && token.size() > name.size() && token[name.size()] == '=') {
      m.value = std::string(token.substr(name.size() + 1));
      m.has_value = true;
      return m;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

FlagForm form_of(const FlagSpec& spec) {
  switch (spec.form) {
  case ArgForm::kNone:
    return FlagForm::kBare;
  case ArgForm::kJoined:
    return FlagForm::kGlued;
  case ArgForm::kEquals:
    return FlagForm::kEquals;
  case ArgForm::kJoinedOrSeparate:
    return is_short(spec.canonical) ? FlagForm::kGlued : FlagForm::kEquals;
  case ArgForm::kSeparate:
    return FlagForm::kTwoArgs;
  }
  return FlagForm::kBare;
}

std::optional<Match> find_row(FlagFamily family, std::string_view token) {
  for (const FlagSpec& spec : flags::table(family)) {
    for (std::string_view spelling : {spec.canonical, spec.alias}) {
      if (!spelling.empty()) {
        if (auto m = match(spec, spelling, token)) {
          return m;
        }
      }
    }
  }
  return std::nullopt;
}

// The row a token belongs to, as its canonical spelling reads back: in the
// generic table a flag's canonical name may be another row's spelling
// (clang's "--include" renders as "-include", which is NVRTC's alias of
// "--pre-include"), and what kcached renders the worker must parse alike.
std::optional<Match> find(FlagFamily family, std::string_view token) {
  auto m = find_row(family, token);
  for (int hops = 0; m && hops < 4; ++hops) {
    const auto again = find_row(family, m->spec->canonical);
    if (!again || again->spec == m->spec) {
      break;
    }
    m->spec = again->spec;
  }
  return m;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// "X", "X=v", "X(a)=a" -> the macro's name; the rest is its definition.
std::string_view macro_name(std::string_view def) {
  return def.substr(0, std::min(def.find('='), def.find('(')));
}

Flag unknown(std::vector<std::string> tokens) {
  Flag f;
  f.name = tokens.front();
  f.role = FlagRole::kUnknown;
  f.tokens = std::move(tokens);
  return f;
}

std::string describe(FlagFamily family, std::string_view token) {
  return "option '" + std::string(token) + "' (" + std::string(family_name(family)) + ")";
}

} // namespace

std::string_view family_name(FlagFamily family) {
  switch (family) {
  case FlagFamily::kGeneric:
    return "generic";
  case FlagFamily::kNvrtc:
    return "nvrtc";
  case FlagFamily::kClang:
    return "clang";
  }
  return "unknown";
}

std::string_view role_name(FlagRole role) {
  switch (role) {
  case FlagRole::kCodegen:
    return "codegen";
  case FlagRole::kMacro:
    return "macro";
  case FlagRole::kDiagnostic:
    return "diagnostic";
  case FlagRole::kDependencyOutput:
    return "dependency output";
  case FlagRole::kOutputPath:
    return "output path";
  case FlagRole::kHostPath:
    return "host path";
  case FlagRole::kWritesFile:
    return "writes a file";
  case FlagRole::kSetByKcache:
    return "set by kcache";
  case FlagRole::kUnknown:
    return "unknown";
  }
  return "unknown";
}

std::vector<std::string> Flag::canonical() const {
  if (role == FlagRole::kUnknown) {
    return tokens;
  }
  if (!has_value) {
    return {name};
  }
  switch (form) {
  case FlagForm::kGlued:
    // An empty value glued on would vanish ("-x" ""): it stays separate.
    return value.empty() ? std::vector<std::string>{name, value}
                         : std::vector<std::string>{name + value};
  case FlagForm::kEquals:
    return {name + "=" + value};
  case FlagForm::kTwoArgs:
    return {name, value};
  case FlagForm::kBare:
    break;
  }
  return {name};
}

tl::expected<std::vector<Flag>, FlagError> parse_flags(FlagFamily family,
                                                       std::span<const std::string> args) {
  const bool generic = family == FlagFamily::kGeneric;
  std::vector<Flag> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    auto m = find(family, token);
    if (!m && flags::takes_argument_by_rule(family, token)) {
      if (!generic) {
        return tl::unexpected(FlagError{describe(family, token) +
                                        " takes an argument kcache does not check: not allowed"});
      }
      std::vector<std::string> tokens = {token};
      if (i + 1 < args.size()) {
        tokens.push_back(args[++i]);
      }
      out.push_back(unknown(std::move(tokens)));
      continue;
    }
    if (!m) {
      if (auto role = flags::rule_role(family, token)) {
        Flag f;
        f.name = token;
        f.role = *role;
        f.tokens = {token};
        out.push_back(std::move(f));
        continue;
      }
      if (!generic) {
        return tl::unexpected(FlagError{"unknown " + describe(family, token) +
                                        ": kcache passes only options it understands"});
      }
      // Unknown: keep it and the next argument (it may be its value) verbatim.
      std::vector<std::string> tokens = {token};
      if (i + 1 < args.size() && !token.starts_with("--") && token.find('=') == std::string::npos) {
        tokens.push_back(args[++i]);
      }
      out.push_back(unknown(std::move(tokens)));
      continue;
    }
    Flag f;
    f.name = std::string(m->spec->canonical);
    f.role = m->spec->role;
    f.form = form_of(*m->spec);
    f.tokens = {token};
    f.has_value = m->has_value;
    f.value = std::move(m->value);
    if (m->takes_next) {
      if (i + 1 >= args.size()) {
        if (generic) {
          out.push_back(unknown({token}));
          continue;
        }
        return tl::unexpected(FlagError{describe(family, token) + " needs a value"});
      }
      f.value = args[++i];
      f.tokens.push_back(f.value);
    }
    if (f.role == FlagRole::kMacro) {
      // nvcc splits "-DA,B" at commas and NVRTC/clang do not: a generic key
      // cannot know which, so such a define stays verbatim and in place.
      const bool ambiguous = generic && f.value.find(',') != std::string::npos;
      if (ambiguous || !is_identifier(macro_name(f.value)) ||
          (f.name == "-U" && f.value != macro_name(f.value))) {
        if (generic) {
          out.push_back(unknown(f.tokens));
          continue;
        }
        return tl::unexpected(FlagError{describe(family, token) + ": '" + f.value +
                                        "' is not a macro " +
                                        (f.name == "-U" ? "name" : "definition")});
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::string> render_flags(std::span<const Flag> flags, bool for_key) {
  std::vector<std::string> out;
  // name -> definition ("X=1", "X(a)=a") or nullopt for -U. Flushed at the
  // end, or before a flag the parser did not understand (it might be the
  // reason a later -D is not a define at all).
  std::map<std::string, std::optional<std::string>, std::less<>> macros;
  auto append = [&](const Flag& f) {
    for (std::string& arg : f.canonical()) {
      out.push_back(std::move(arg));
    }
  };
  auto flush = [&] {
    for (const auto& [name, def] : macros) {
      out.push_back(def ? "-D" + *def : "-U" + name);
    }
    macros.clear();
  };
  for (const Flag& f : flags) {
    switch (f.role) {
    case FlagRole::kMacro:
      if (f.name == "-U") {
        macros[f.value] = std::nullopt;
      } else {
        const std::string name(macro_name(f.value));
        // "-DX" means "-DX=1" to every compiler kcache knows.
        macros[name] = f.value.find('=') == std::string::npos ? f.value + "=1" : f.value;
      }
      break;
    case FlagRole::kUnknown:
      flush();
      append(f);
      break;
    case FlagRole::kDependencyOutput:
    case FlagRole::kOutputPath:
      if (!for_key) {
        append(f);
      }
      break;
    default:
      append(f);
      break;
    }
  }
  flush();
  return out;
}

} // namespace kcache::cachekey
