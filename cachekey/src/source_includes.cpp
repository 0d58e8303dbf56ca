#include <kcache/cachekey/source_includes.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace kcache::cachekey {
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

// Phases 1-2: line ends as clang reads them (CR LF, and a lone CR too),
// trigraphs for '#' and '\' (harmless to read even where the compiler would
// not), then backslash-newline splices (trailing blanks too, as gcc and clang
// accept them).
std::string splice_lines(std::string_view text) {
  std::string t;
  t.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      t += '\n';
      i += i + 1 < text.size() && text[i + 1] == '\n' ? 1 : 0;
    } else if (text.substr(i).starts_with("?\?=")) {
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

// Whether position i is inside a preprocessing number (1'000, 0x1'F): there
// a quote is a digit separator, anywhere else it opens a character literal.
bool in_pp_number(std::string_view s, std::size_t i) {
  std::size_t begin = i;
  while (begin > 0 &&
         (is_ident_char(s[begin - 1]) || s[begin - 1] == '.' || s[begin - 1] == '\'')) {
    --begin;
  }
  return begin < i && (std::isdigit(static_cast<unsigned char>(s[begin])) ||
                       (s[begin] == '.' && begin + 1 < i &&
                        std::isdigit(static_cast<unsigned char>(s[begin + 1]))));
}

// A raw string's delimiter: at most 16 characters, none of them a space,
// parenthesis, backslash or control character. Anything else is no raw string.
bool is_raw_delimiter(std::string_view d) {
  return d.size() <= 16 && std::none_of(d.begin(), d.end(), [](char c) {
           return c == ' ' || c == '(' || c == ')' || c == '\\' || c == '"' ||
                  static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f;
         });
}

bool is_raw_prefix(std::string_view id) {
  static constexpr std::array<std::string_view, 5> kRaw = {"R", "LR", "uR", "UR", "u8R"};
  return std::find(kRaw.begin(), kRaw.end(), id) != kRaw.end();
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
    } else if (c == '"' && is_raw_prefix(identifier_before(s, i)) &&
               s.find('(', i + 1) != std::string_view::npos &&
               is_raw_delimiter(s.substr(i + 1, s.find('(', i + 1) - i - 1))) {
      // R"delim( ... )delim"
      const std::size_t open = s.find('(', i + 1);
      const std::string close = ")" + std::string(s.substr(i + 1, open - i - 1)) + "\"";
      const std::size_t end = s.find(close, open + 1);
      if (end == std::string_view::npos) {
        return tl::unexpected(std::string("unterminated raw string literal"));
      }
      std::string literal(s.substr(i, end + close.size() - i));
      std::replace(literal.begin(), literal.end(), '\n', kRawNewline);
      out += literal;
      i = end + close.size();
    } else if (c == '"' || (c == '\'' && !in_pp_number(s, i))) {
      // A plain literal ends at its quote or, unterminated, at the line's end.
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
  // Blanks, and what clang skips or a scan must not trip on: NUL, a byte
  // order mark, other non-ASCII bytes (U+00A0), and /* comments */ that end
  // on this line.
  void skip_space() {
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (is_space(s[i]) || s[i] == kRawNewline || c == 0 || c >= 0x80) {
        ++i;
      } else if (s.substr(i).starts_with("/*") && s.find("*/", i + 2) != std::string_view::npos) {
        i = s.find("*/", i + 2) + 2;
      } else {
        break;
      }
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

// Anywhere in the text, in code, strings or comments alike: assembler file
// directives and dependency pragmas (however the pragma is split over lines).
tl::expected<void, std::string> scan_whole_text(std::string_view text) {
  const std::string low = lower(text);
  for (std::string_view word : {".incbin", ".include"}) {
    if (low.find(word) != std::string::npos) {
      return tl::unexpected("the assembler directive " + std::string(word) +
                            " reads a host file and is not allowed in a compile spec");
    }
  }
  std::string squeezed;
  std::copy_if(low.begin(), low.end(), std::back_inserter(squeezed),
               [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  if (squeezed.find("gccdependency") != std::string::npos) {
    return tl::unexpected(std::string("a GCC dependency pragma reads a host file"));
  }
  return {};
}

// A line at `c` that may be a directive: #include-like ones must name a
// literal header; any line may hold __has_include-like operands.
tl::expected<void, std::string> scan_line(Cursor c, int line, std::vector<IncludeRef>& refs) {
  c.skip_space();
  const std::string_view rest = c.s.substr(c.i);
  if (rest.starts_with("#") || rest.starts_with("%:")) {
    c.i += c.s[c.i] == '#' ? 1 : 2;
    c.skip_space();
    const std::string_view directive = c.identifier();
    if (std::find(kIncludeDirectives.begin(), kIncludeDirectives.end(), directive) !=
        kIncludeDirectives.end()) {
      auto ref = header_name(c, "#" + std::string(directive), line);
      if (!ref) {
        return tl::unexpected(ref.error());
      }
      refs.push_back(std::move(*ref));
      return {};
    }
  } else if (rest.starts_with("import")) {
    // C++20 header units ("import <x>;") read headers too.
    c.i += 6;
    c.skip_space();
    if (c.i < c.s.size() && (c.s[c.i] == '<' || c.s[c.i] == '"')) {
      auto ref = header_name(c, "import", line);
      if (!ref) {
        return tl::unexpected(ref.error());
      }
      refs.push_back(std::move(*ref));
      return {};
    }
  }
  return scan_has_include(c.s, line, refs);
}

// Calls `each(line_text, line_number)` for every line of `text`.
template <typename Each>
tl::expected<void, std::string> for_each_line(std::string_view text, Each each) {
  std::size_t begin = 0;
  int line = 0;
  while (begin < text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    ++line;
    if (auto ok = each(text.substr(begin, end - begin), line); !ok) {
      return ok;
    }
    begin = end + 1;
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
  auto fail = [&](const std::string& why) {
    return tl::unexpected(std::string(file_name) + ":" + why);
  };
  const std::string spliced = splice_lines(text);
  if (auto ok = scan_whole_text(spliced); !ok) {
    return fail(" " + ok.error());
  }
  std::vector<IncludeRef> refs;
  auto at = [&](int line, const std::string& why) { return std::to_string(line) + ": " + why; };
  // Two readings, and a spec must pass both. First as a compiler reads it:
  // comments gone, literals whole.
  auto code = strip_comments(spliced);
  if (!code) {
    return fail(" " + code.error());
  }
  if (auto ok = for_each_line(
          *code,
          [&](std::string_view line_text, int line) -> tl::expected<void, std::string> {
            if (auto scanned = scan_line(Cursor{line_text}, line, refs); !scanned) {
              return tl::unexpected(at(line, scanned.error()));
            }
            return {};
          });
      !ok) {
    return fail(ok.error());
  }
  // Then line by line with no idea of comments or literals, from the line's
  // start and after every "*/": a directive that the first reading took for a
  // comment or a string (a lexing rule it got wrong, another language mode)
  // is still seen. The cost is refusing such text inside a comment.
  if (auto ok = for_each_line(
          spliced,
          [&](std::string_view line_text, int line) -> tl::expected<void, std::string> {
            for (std::size_t start = 0; start != std::string_view::npos;) {
              if (auto scanned = scan_line(Cursor{line_text, start}, line, refs); !scanned) {
                return tl::unexpected(at(line, scanned.error()));
              }
              start = line_text.find("*/", start);
              start = start == std::string_view::npos ? start : start + 2;
            }
            return {};
          });
      !ok) {
    return fail(ok.error());
  }
  for (const IncludeRef& ref : refs) {
    if (auto ok = check_relative_name(ref.name); !ok) {
      return fail(at(ref.line, "#include of " + ok.error() +
                                   ": a compile spec may include only its own headers and the "
                                   "toolchain's (pack host headers into the spec)"));
    }
  }
  return refs;
}

} // namespace kcache::cachekey
