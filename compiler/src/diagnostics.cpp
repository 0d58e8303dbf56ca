#include <kcache/compiler/diagnostics.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace kcache::compiler {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD"; // U+FFFD
// A diagnostic quoted in a message is cut here: the log holds the rest.
constexpr std::size_t kMaxDiagnostic = 400;

bool is_continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// The length of the valid UTF-8 sequence at `s[i]`, or 0 if there is none
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    return 1;
  }
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF; // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    lo = c == 0xE0 ? 0xA0 : 0x80;
    hi = c == 0xED ? 0x9F : 0xBF;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    lo = c == 0xF0 ? 0x90 : 0x80;
    hi = c == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (i + n > s.size()) {
    return 0;
  }
  const auto second = static_cast<unsigned char>(s[i + 1]);
  if (second < lo || second > hi) {
    return 0;
  }
  for (std::size_t k = 2; k < n; ++k) {
    if (!is_continuation(static_cast<unsigned char>(s[i + k]))) {
      return 0;
    }
  }
  return n;
}

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Case-insensitive search.
std::size_t find_word(std::string_view line, std::string_view word, std::size_t from = 0) {
  const auto it =
      std::search(line.begin() + static_cast<std::ptrdiff_t>(from), line.end(), word.begin(),
                  word.end(), [](char a, char b) { return lower(a) == lower(b); });
  return it == line.end() ? std::string_view::npos : static_cast<std::size_t>(it - line.begin());
}

// "error:", "error   :", "fatal :" as a word: a diagnostic's severity. Not
// "1 error generated." nor "Ptx assembly aborted due to errors".
bool has_severity(std::string_view line) {
  for (std::string_view word : {"error", "fatal"}) {
    for (std::size_t at = find_word(line, word); at != std::string_view::npos;
         at = find_word(line, word, at + 1)) {
      if (at > 0 && std::isalnum(static_cast<unsigned char>(line[at - 1])) != 0) {
        continue;
      }
      std::size_t end = at + word.size();
      while (end < line.size() && (line[end] == ' ' || line[end] == '\t')) {
        ++end;
      }
      if (end < line.size() && line[end] == ':') {
        return true;
      }
    }
  }
  return false;
}

// Calls `f(line)` for each line until it returns true; returns that line.
template <typename F> std::string_view find_line(std::string_view text, F f) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = trim(text.substr(0, end));
    if (!line.empty() && f(line)) {
      return line;
    }
    if (end == std::string_view::npos) {
      break;
    }
    text.remove_prefix(end + 1);
  }
  return {};
}

// At most `max_bytes` of `s` from its start, ending on a character boundary.
std::string head(std::string_view s, std::size_t max_bytes) {
  if (s.size() <= max_bytes) {
    return std::string(s);
  }
  std::size_t end = max_bytes;
  while (end > 0 && is_continuation(static_cast<unsigned char>(s[end]))) {
    --end;
  }
  return std::string(s.substr(0, end)) + "...";
}

} // namespace

std::string clean_log(std::string_view log) {
  std::string out;
  out.reserve(log.size());
  for (std::size_t i = 0; i < log.size();) {
    if (log[i] == '\0') {
      ++i;
      continue;
    }
    const std::size_t n = utf8_length(log, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    out.append(log, i, n);
    i += n;
  }
  return out;
}

std::string first_diagnostic(std::string_view log) {
  return head(clean_log(find_line(log, has_severity)), kMaxDiagnostic);
}

std::string log_tail(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return std::string(text);
  }
  std::size_t start = text.size() - max_bytes;
  while (start < text.size() && is_continuation(static_cast<unsigned char>(text[start]))) {
    ++start;
  }
  // A whole first line reads better than half of one, if one ends nearby.
  if (const std::size_t nl = text.find('\n', start);
      nl != std::string_view::npos && nl - start < 256 && nl + 1 < text.size()) {
    start = nl + 1;
  }
  return "...\n" + std::string(text.substr(start));
}

CompileError tidy_error(CompileError error) {
  error.message = clean_log(error.message);
  error.log = clean_log(error.log);
  if (error.code != CompileError::Code::kResourceLimit &&
      error.code != CompileError::Code::kCancelled) {
    const std::string first = first_diagnostic(error.log);
    if (!first.empty() && error.message.find(first) == std::string::npos) {
      // The diagnostic first: listings cut long messages short.
      error.message = error.message.empty() ? first : first + " (" + error.message + ")";
    }
  }
  return error;
}

std::string out_of_memory_line(std::string_view text) {
  static constexpr std::array<std::string_view, 5> kSigns = {
      "memory allocation failure", // ptxas, in NVRTC and nvJitLink
      "out of memory",             // LLVM ERROR: out of memory; CUDA tools
      "bad_alloc",                 // an uncaught std::bad_alloc
      "cannot allocate memory",    // strerror(ENOMEM)
      "allocation failed",         // glibc/jemalloc style
  };
  const std::string_view line = find_line(text, [](std::string_view l) {
    return std::any_of(kSigns.begin(), kSigns.end(),
                       [&](std::string_view sign) { return find_word(l, sign) != l.npos; });
  });
  return head(clean_log(line), kMaxDiagnostic);
}

} // namespace kcache::compiler
