#include "include_scan.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace kcache::compiler {
namespace {

// Stands for a newline inside a raw string literal: it does not end a line.
constexpr char kRawNewline = '\x01';

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Phases 1-2: trigraphs for '#' and '\' (harmless to read even where the
// compiler would not), then backslash-newline splices (trailing blanks too, as
// gcc and clang accept them).
std::string splice_lines(std::string_view text) {
  std::string t;
  t.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("?\?=")) {
      t += '#';
      i += 2;
    } else if (text.substr(i).starts_with("?\?/")) {
      t += '\\';
      i += 2;
    } else {
      t += text[i];
    }
  }
  std::string out;
  out.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\') {
      std::size_t j = i + 1;
      while (j < t.size() && is_space(t[j])) {
        ++j;
      }
      if (j < t.size() && t[j] == '\n') {
        i = j;
        continue;
      }
    }
    out += t[i];
  }
  return out;
}

// The identifier that ends right before position `end` ("u8" in u8"x").
std::string_view identifier_before(std::string_view s, std::size_t end) {
  std::size_t begin = end;
  while (begin > 0 && is_ident_char(s[begin - 1])) {
    --begin;
  }
  return s.substr(begin, end - begin);
}

bool is_literal_prefix(std::string_view id, bool raw) {
  static constexpr std::array<std::string_view, 5> kPlain = {"", "L", "u", "U", "u8"};
  static constexpr std::array<std::string_view, 5> kRaw = {"R", "LR", "uR", "UR", "u8R"};
  const auto& set = raw ? kRaw : kPlain;
  return std::find(set.begin(), set.end(), id) != set.end();
}

// Phase 3: comments become one space; literals are copied whole (newlines in
// raw strings become kRawNewline). Returns an error for an unterminated block
// comment or raw string, which no compiler accepts either.
tl::expected<std::string, std::string> strip_comments(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') {
        ++i;
      }
      out += ' ';
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const std::size_t end = s.find("*/", i + 2);
      if (end == std::string_view::npos) {
        return tl::unexpected(std::string("unterminated /* comment"));
      }
      i = end + 2;
      out += ' ';
    } else if (c == '"' && is_literal_prefix(identifier_before(s, i), /*raw=*/true)) {
      // R"delim( ... )delim"
      const std::size_t open = s.find('(', i + 1);
      if (open == std::string_view::npos || open - i - 1 > 16) {
        return tl::unexpected(std::string("malformed raw string literal"));
      }
      const std::string close = ")" + std::string(s.substr(i + 1, open - i - 1)) + "\"";
      const std::size_t end = s.find(close, open + 1);
      if (end == std::string_view::npos) {
        return tl::unexpected(std::string("unterminated raw string literal"));
      }
      std::string literal(s.substr(i, end + close.size() - i));
      std::replace(literal.begin(), literal.end(), '\n', kRawNewline);
      out += literal;
      i = end + close.size();
    } else if (c == '"' || (c == '\'' && is_literal_prefix(identifier_before(s, i), false) &&
                            !(i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))))) {
      // A plain literal ends at its quote or, unterminated, at the line's end.
      // (A quote right after a digit is a digit separator: 1'000.)
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c && s[j] != '\n') {
        j += s[j] == '\\' && j + 1 < s.size() && s[j + 1] != '\n' ? 2 : 1;
      }
      const std::size_t end = j < s.size() && s[j] == c ? j + 1 : j;
      out += s.substr(i, end - i);
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct Cursor {
  std::string_view s;
  std::size_t i = 0;
  void skip_space() {
    while (i < s.size() && (is_space(s[i]) || s[i] == kRawNewline)) {
      ++i;
    }
  }
  std::string_view identifier() {
    const std::size_t begin = i;
    while (i < s.size() && is_ident_char(s[i])) {
      ++i;
    }
    return s.substr(begin, i - begin);
  }
};

// At a header name: "x" or <x>. Anything else is a computed name.
tl::expected<IncludeRef, std::string> header_name(Cursor& c, std::string_view what, int line) {
  c.skip_space();
  if (c.i >= c.s.size() || (c.s[c.i] != '"' && c.s[c.i] != '<')) {
    return tl::unexpected(std::string(what) +
                          " with a computed header name: write the name literally, "
                          "in quotes or angle brackets");
  }
  const char close = c.s[c.i] == '"' ? '"' : '>';
  const std::size_t end = c.s.find(close, c.i + 1);
  if (end == std::string_view::npos) {
    return tl::unexpected(std::string(what) + " with an unterminated header name");
  }
  IncludeRef ref{std::string(c.s.substr(c.i + 1, end - c.i - 1)), close == '>', line};
  c.i = end + 1;
  return ref;
}

constexpr std::array<std::string_view, 4> kIncludeDirectives = {"include", "include_next", "import",
                                                                "embed"};
constexpr std::array<std::string_view, 4> kHasIncludes = {"__has_include", "__has_include_next",
                                                          "__has_embed", "__has_import"};

// Every __has_include(...)-like operand on a line must be a literal name.
tl::expected<void, std::string> scan_has_include(std::string_view line_text, int line,
                                                 std::vector<IncludeRef>& refs) {
  Cursor c{line_text};
  while (c.i < c.s.size()) {
    if (!is_ident_char(c.s[c.i])) {
      ++c.i;
      continue;
    }
    const std::string_view id = c.identifier();
    if (std::find(kHasIncludes.begin(), kHasIncludes.end(), id) == kHasIncludes.end()) {
      continue;
    }
    c.skip_space();
    if (c.i >= c.s.size() || c.s[c.i] != '(') {
      return tl::unexpected(std::string(id) + " without a parenthesized header name");
    }
    ++c.i;
    auto ref = header_name(c, id, line);
    if (!ref) {
      return tl::unexpected(ref.error());
    }
    refs.push_back(std::move(*ref));
  }
  return {};
}

// Strings that would make an assembler or the preprocessor read a file.
tl::expected<void, std::string> scan_literals(std::string_view line_text) {
  const std::string low = lower(line_text);
  for (std::string_view word : {".incbin", ".include"}) {
    if (low.find(word) != std::string::npos) {
      return tl::unexpected("the assembler directive " + std::string(word) +
                            " reads a host file and is not allowed in a compile spec");
    }
  }
  if (low.find("_pragma") != std::string::npos && low.find("dependency") != std::string::npos) {
    return tl::unexpected(std::string("_Pragma(\"GCC dependency\") reads a host file"));
  }
  return {};
}

} // namespace

tl::expected<void, std::string> check_relative_name(std::string_view name) {
  if (name.empty()) {
    return tl::unexpected(std::string("an empty file name"));
  }
  if (name.front() == '/') {
    return tl::unexpected("'" + std::string(name) + "' is an absolute path");
  }
  if (name.find('\\') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return tl::unexpected("'" + std::string(name) + "' contains a backslash or NUL");
  }
  std::size_t begin = 0;
  while (begin <= name.size()) {
    const std::size_t end = std::min(name.find('/', begin), name.size());
    if (name.substr(begin, end - begin) == "..") {
      return tl::unexpected("'" + std::string(name) + "' leaves the spec's directory (\"..\")");
    }
    begin = end + 1;
  }
  return {};
}

tl::expected<std::vector<IncludeRef>, std::string> scan_includes(std::string_view file_name,
                                                                 std::string_view text) {
  auto fail = [&](int line, const std::string& why) {
    return tl::unexpected(std::string(file_name) + (line > 0 ? ":" + std::to_string(line) : "") +
                          ": " + why);
  };
  auto code = strip_comments(splice_lines(text));
  if (!code) {
    return fail(0, code.error());
  }
  std::vector<IncludeRef> refs;
  std::size_t begin = 0;
  int line = 0;
  while (begin < code->size()) {
    const std::size_t end = std::min(code->find('\n', begin), code->size());
    const std::string_view line_text = std::string_view(*code).substr(begin, end - begin);
    begin = end + 1;
    ++line;
    if (auto ok = scan_literals(line_text); !ok) {
      return fail(line, ok.error());
    }
    Cursor c{line_text};
    c.skip_space();
    const bool hash = c.s.substr(c.i).starts_with("#") || c.s.substr(c.i).starts_with("%:");
    if (!hash) {
      // C++20 header units ("import <x>;") read headers too.
      if (c.s.substr(c.i).starts_with("import")) {
        c.i += 6;
        c.skip_space();
        if (c.i < c.s.size() && (c.s[c.i] == '<' || c.s[c.i] == '"')) {
          auto ref = header_name(c, "import", line);
          if (!ref) {
            return fail(line, ref.error());
          }
          refs.push_back(std::move(*ref));
        }
      }
      continue;
    }
    c.i += c.s[c.i] == '#' ? 1 : 2;
    c.skip_space();
    const std::string_view directive = c.identifier();
    if (std::find(kIncludeDirectives.begin(), kIncludeDirectives.end(), directive) !=
        kIncludeDirectives.end()) {
      auto ref = header_name(c, "#" + std::string(directive), line);
      if (!ref) {
        return fail(line, ref.error());
      }
      refs.push_back(std::move(*ref));
      continue;
    }
    if (directive == "pragma" && lower(line_text).find("dependency") != std::string::npos) {
      return fail(line, "#pragma GCC dependency reads a host file");
    }
    if (auto ok = scan_has_include(line_text, line, refs); !ok) {
      return fail(line, ok.error());
    }
  }
  for (const IncludeRef& ref : refs) {
    if (auto ok = check_relative_name(ref.name); !ok) {
      return fail(ref.line, "#include of " + ok.error() +
                                ": a compile spec may include only its own headers and the "
                                "toolchain's (pack host headers into the spec)");
    }
  }
  return refs;
}

} // namespace kcache::compiler
