#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/guards.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace kcache::cachekey {
namespace {

enum class TokenKind { kIdentifier, kNumber, kOperator, kOpen, kClose, kDot, kComma };

struct Token {
  TokenKind kind;
  std::string text;
};

constexpr std::array<std::string_view, 6> kComparisons = {"<=", ">=", "==", "!=", "<", ">"};
constexpr std::array<std::string_view, 14> kOperators = {"<=", ">=", "==", "!=", "//", "**", "&&",
                                                         "||", "<",  ">",  "+",  "-",  "*",  "/"};

bool is_comparison(const Token& t) {
  return t.kind == TokenKind::kOperator &&
         std::find(kComparisons.begin(), kComparisons.end(), t.text) != kComparisons.end();
}

tl::expected<std::vector<Token>, GuardError> tokenize(std::string_view s) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
        ++j;
      }
      tokens.push_back({TokenKind::kIdentifier, std::string(s.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        ++j;
      }
      std::string digits(s.substr(i, j - i));
      digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
      tokens.push_back({TokenKind::kNumber, digits});
      i = j;
    } else if (c == '(' || c == '[') {
      tokens.push_back({TokenKind::kOpen, std::string(1, c)});
      ++i;
    } else if (c == ')' || c == ']') {
      tokens.push_back({TokenKind::kClose, std::string(1, c)});
      ++i;
    } else if (c == '.') {
      tokens.push_back({TokenKind::kDot, "."});
      ++i;
    } else if (c == ',') {
      tokens.push_back({TokenKind::kComma, ","});
      ++i;
    } else if (c == '%') {
      tokens.push_back({TokenKind::kOperator, "%"});
      ++i;
    } else {
      const auto rest = s.substr(i);
      const auto op = std::find_if(kOperators.begin(), kOperators.end(),
                                   [&](std::string_view o) { return rest.starts_with(o); });
      if (op == kOperators.end()) {
        return tl::unexpected(GuardError{"unexpected character '" + std::string(1, c) +
                                         "' in guard '" + std::string(s) + "'"});
      }
      tokens.push_back({TokenKind::kOperator, std::string(*op)});
      i += op->size();
    }
  }
  return tokens;
}

std::string render(const std::vector<Token>& tokens, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) {
    const Token& t = tokens[i];
    const bool binary_op =
        t.kind == TokenKind::kOperator &&
        !(t.text == "-" &&
          (i == begin || tokens[i - 1].kind == TokenKind::kOperator ||
           tokens[i - 1].kind == TokenKind::kOpen || tokens[i - 1].kind == TokenKind::kComma));
    if (binary_op) {
      out += ' ' + t.text + ' ';
    } else if (t.kind == TokenKind::kComma) {
      out += ", ";
    } else {
      out += t.text;
    }
  }
  return out;
}

bool is_literal(std::string_view side) {
  if (side.starts_with('-')) {
    side.remove_prefix(1);
  }
  return !side.empty() && std::all_of(side.begin(), side.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

} // namespace

tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const SymbolMap& symbols) {
  auto tokens = tokenize(guard);
  if (!tokens) {
    return tl::unexpected(tokens.error());
  }
  if (tokens->empty()) {
    return tl::unexpected(GuardError{"empty guard"});
  }
  int depth = 0;
  std::vector<std::size_t> top_level_comparisons;
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    Token& t = (*tokens)[i];
    if (t.kind == TokenKind::kOpen) {
      ++depth;
    } else if (t.kind == TokenKind::kClose && --depth < 0) {
      return tl::unexpected(
          GuardError{"unbalanced brackets in guard '" + std::string(guard) + "'"});
    } else if (t.kind == TokenKind::kIdentifier) {
      // A name right after '.' is an attribute (x.stride), never a symbol.
      const bool attribute = i > 0 && (*tokens)[i - 1].kind == TokenKind::kDot;
      if (const auto it = symbols.find(t.text); !attribute && it != symbols.end()) {
        t.text = it->second;
      }
    } else if (depth == 0 && is_comparison(t)) {
      top_level_comparisons.push_back(i);
    }
  }
  if (depth != 0) {
    return tl::unexpected(GuardError{"unbalanced brackets in guard '" + std::string(guard) + "'"});
  }
  if (top_level_comparisons.size() != 1) {
    return render(*tokens, 0, tokens->size());
  }
  const std::size_t at = top_level_comparisons.front();
  std::string lhs = render(*tokens, 0, at);
  std::string rhs = render(*tokens, at + 1, tokens->size());
  std::string op = (*tokens)[at].text;
  if (op == ">" || op == ">=") {
    std::swap(lhs, rhs);
    op = op == ">" ? "<" : "<=";
  } else if (op == "==" || op == "!=") {
    // A literal goes on the right ("s0 % 16 == 0"); other pairs sort.
    const bool lhs_literal = is_literal(lhs);
    const bool rhs_literal = is_literal(rhs);
    if (lhs_literal != rhs_literal ? lhs_literal : rhs < lhs) {
      std::swap(lhs, rhs);
    }
  }
  return lhs + " " + op + " " + rhs;
}

tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const SymbolMap& symbols) {
  std::vector<std::string> out;
  out.reserve(guards.size());
  for (const std::string& guard : guards) {
    auto normalized = normalize_guard(guard, symbols);
    if (!normalized) {
      return tl::unexpected(normalized.error());
    }
    out.push_back(std::move(*normalized));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Digest guards_digest(std::span<const std::string> normalized_guards) {
  CanonicalWriter w;
  w.tag("guards").list(normalized_guards.size());
  for (const std::string& g : normalized_guards) {
    w.str(g);
  }
  return w.sha256();
}

} // namespace kcache::cachekey
