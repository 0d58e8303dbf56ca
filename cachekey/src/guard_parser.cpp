#include "guard_parser.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

namespace kcache::cachekey::guard {
namespace {

using GuardUnexpected = tl::unexpected<GuardError>;

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Python keywords that have no meaning in a guard: refused, not read as names.
constexpr std::array<std::string_view, 27> kUnsupportedKeywords = {
    "if",     "else",     "elif",   "lambda", "for", "while",  "def",     "return", "yield",
    "await",  "async",    "from",   "import", "as",  "with",   "del",     "pass",   "class",
    "global", "nonlocal", "assert", "raise",  "try", "except", "finally", "break",  "continue"};
constexpr std::array<std::string_view, 5> kWordOperators = {"and", "or", "not", "in", "is"};
// Longest first, so "**" is never read as two "*".
constexpr std::array<std::string_view, 22> kSymbolOperators = {
    "**", "//", "==", "!=", "<=", ">=", "&&", "||", "<", ">", "+",
    "-",  "*",  "/",  "%",  "!",  "(",  ")",  "[",  "]", ",", "."};

enum class TokenKind { kName, kNumber, kString, kOperator, kEnd };

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text; // kNumber: canonical literal
  std::size_t offset = 0;
};

constexpr std::uint64_t kLimb = 1000000000; // nine decimal digits per limb

// Appends `digit` to a little-endian number in base kLimb after multiplying it
// by `base`.
void multiply_add(std::vector<std::uint32_t>& limbs, std::uint64_t base, std::uint64_t digit) {
  std::uint64_t carry = digit;
  for (std::uint32_t& limb : limbs) {
    const std::uint64_t v = limb * base + carry;
    limb = static_cast<std::uint32_t>(v % kLimb);
    carry = v / kLimb;
  }
  if (carry > 0) {
    limbs.push_back(static_cast<std::uint32_t>(carry));
  }
}

int digit_value(char c) {
  if (is_digit(c)) {
    return c - '0';
  }
  const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower >= 'a' && lower <= 'z' ? lower - 'a' + 10 : 99;
}

// Python's rule for '_' in a run of digits: single, and between digits (or
// right after a base prefix: 0x_10).
bool separators_ok(std::string_view digits, bool after_prefix) {
  return digits.find("__") == std::string_view::npos && !digits.ends_with('_') &&
         (after_prefix || !digits.starts_with('_'));
}

std::string strip_separators(std::string_view s) {
  std::string out;
  std::copy_if(s.begin(), s.end(), std::back_inserter(out), [](char c) { return c != '_'; });
  return out;
}

class Lexer {
public:
  explicit Lexer(std::string_view text) : s_(text) {}

  tl::expected<std::vector<Token>, GuardError> run() {
    std::vector<Token> tokens;
    while (true) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])) != 0) {
        ++i_;
      }
      if (i_ == s_.size()) {
        tokens.push_back(Token{TokenKind::kEnd, "end of guard", i_});
        return tokens;
      }
      auto token = next();
      if (!token) {
        return GuardUnexpected(token.error());
      }
      tokens.push_back(std::move(*token));
    }
  }

private:
  GuardUnexpected error(const std::string& what) const {
    return GuardUnexpected(GuardError{what + " at offset " + std::to_string(i_)});
  }

  tl::expected<Token, GuardError> next() {
    const char c = s_[i_];
    const std::size_t start = i_;
    if (is_name_start(c)) {
      while (i_ < s_.size() && is_name_char(s_[i_])) {
        ++i_;
      }
      std::string word(s_.substr(start, i_ - start));
      if (std::find(kUnsupportedKeywords.begin(), kUnsupportedKeywords.end(), word) !=
          kUnsupportedKeywords.end()) {
        i_ = start;
        return error("unsupported keyword '" + word + "'");
      }
      const bool op =
          std::find(kWordOperators.begin(), kWordOperators.end(), word) != kWordOperators.end();
      return Token{op ? TokenKind::kOperator : TokenKind::kName, std::move(word), start};
    }
    if (is_digit(c) || (c == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1]))) {
      return number();
    }
    if (c == '\'' || c == '"') {
      return string_literal();
    }
    const auto rest = s_.substr(i_);
    const auto op = std::find_if(kSymbolOperators.begin(), kSymbolOperators.end(),
                                 [&](std::string_view o) { return rest.starts_with(o); });
    if (op == kSymbolOperators.end()) {
      return error("unexpected character '" + std::string(1, c) + "'");
    }
    i_ += op->size();
    return Token{TokenKind::kOperator, std::string(*op), start};
  }

  tl::expected<Token, GuardError> number() {
    const std::size_t start = i_;
    bool is_float = false;
    if (s_[i_] == '0' && i_ + 1 < s_.size() &&
        std::string_view("xXoObB").find(s_[i_ + 1]) != std::string_view::npos) {
      i_ += 2;
      while (i_ < s_.size() && is_name_char(s_[i_])) {
        ++i_;
      }
    } else {
      auto digits = [&] {
        while (i_ < s_.size() && (is_digit(s_[i_]) || s_[i_] == '_')) {
          ++i_;
        }
      };
      digits();
      if (i_ < s_.size() && s_[i_] == '.') {
        is_float = true;
        ++i_;
        digits();
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        is_float = true;
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) {
          ++i_;
        }
        digits();
      }
    }
    if (i_ < s_.size() && is_name_char(s_[i_])) {
      return error("malformed number '" + std::string(s_.substr(start, i_ + 1 - start)) + "'");
    }
    const auto literal = s_.substr(start, i_ - start);
    auto canonical = is_float ? canonical_float(literal) : canonical_integer(literal);
    if (!canonical) {
      return GuardUnexpected(canonical.error());
    }
    return Token{TokenKind::kNumber, std::move(*canonical), start};
  }

  tl::expected<Token, GuardError> string_literal() {
    const std::size_t start = i_;
    const char quote = s_[i_++];
    while (i_ < s_.size() && s_[i_] != quote) {
      i_ += s_[i_] == '\\' ? 2 : 1;
    }
    if (i_ >= s_.size()) {
      i_ = start;
      return error("unterminated string");
    }
    ++i_;
    return Token{TokenKind::kString, std::string(s_.substr(start, i_ - start)), start};
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

Expr make(Kind kind, std::string text, std::vector<Expr> children) {
  Expr e;
  e.kind = kind;
  e.text = std::move(text);
  e.children = std::move(children);
  for (const Expr& child : e.children) {
    e.depth = std::max(e.depth, child.depth + 1);
  }
  return e;
}

// Brace lists would copy whole subtrees; these move them.
std::vector<Expr> operands(Expr a) {
  std::vector<Expr> out;
  out.push_back(std::move(a));
  return out;
}
std::vector<Expr> operands(Expr a, Expr b) {
  std::vector<Expr> out = operands(std::move(a));
  out.push_back(std::move(b));
  return out;
}

constexpr std::array<std::string_view, 6> kComparisonOperators = {"<", ">", "<=", ">=", "==", "!="};

class Parser {
public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  tl::expected<Expr, GuardError> run() {
    auto e = parse_or();
    if (!e) {
      return e;
    }
    if (peek().kind != TokenKind::kEnd) {
      return error("unexpected '" + peek().text + "'");
    }
    return e;
  }

private:
  using Result = tl::expected<Expr, GuardError>;

  const Token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool at_operator(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool accept(std::string_view op) {
    if (at_operator(op)) {
      ++pos_;
      return true;
    }
    return false;
  }
  GuardUnexpected error(const std::string& what) const {
    return GuardUnexpected(GuardError{what + " at offset " + std::to_string(peek().offset)});
  }
  // Every node is checked as it is made, so no later pass recurses too deep.
  Result checked(Expr e) const {
    if (e.depth > kMaxDepth) {
      return error("guard expression is more than " + std::to_string(kMaxDepth) + " levels deep");
    }
    return e;
  }
  GuardUnexpected too_deep() const {
    return error("guard nests more than " + std::to_string(kMaxNesting) +
                 " parentheses, brackets, calls, unary operators or '**'");
  }

  struct Nesting {
    explicit Nesting(std::size_t& level) : level_(level) { ++level_; }
    ~Nesting() { --level_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    std::size_t& level_;
  };

  Result parse_or() { return parse_bool("or", "||", &Parser::parse_and); }
  Result parse_and() { return parse_bool("and", "&&", &Parser::parse_not); }

  Result parse_bool(std::string_view word, std::string_view symbol, Result (Parser::*next)()) {
    auto first = (this->*next)();
    if (!first) {
      return first;
    }
    std::vector<Expr> items;
    items.push_back(std::move(*first));
    while (accept(word) || accept(symbol)) {
      auto operand = (this->*next)();
      if (!operand) {
        return operand;
      }
      items.push_back(std::move(*operand));
    }
    if (items.size() == 1) {
      return std::move(items.front());
    }
    return checked(make(Kind::kBoolOp, std::string(word), std::move(items)));
  }

  Result parse_not() {
    const bool word = accept("not");
    if (!word && !accept("!")) {
      return parse_comparison();
    }
    const Nesting nesting(nesting_);
    if (nesting_ > kMaxNesting) {
      return too_deep();
    }
    auto operand = parse_not();
    if (!operand) {
      return operand;
    }
    // C reads "!a == b" as "(!a) == b" and "!a % 2" as "(!a) % 2"; Python's
    // "not" takes the whole comparison or arithmetic.
    if (!word && (operand->kind == Kind::kCompare || operand->kind == Kind::kBinary) &&
        !operand->parenthesized) {
      return error("'!' before an unparenthesized comparison or arithmetic is ambiguous; "
                   "write !(a % 2) or (!a) % 2");
    }
    return checked(make(Kind::kUnary, "not", operands(std::move(*operand))));
  }

  // The comparison operator at the cursor, consumed; empty when there is none.
  std::string comparison_operator() {
    const Token& t = peek();
    if (t.kind != TokenKind::kOperator) {
      return {};
    }
    if (std::find(kComparisonOperators.begin(), kComparisonOperators.end(), t.text) !=
            kComparisonOperators.end() ||
        t.text == "in") {
      ++pos_;
      return t.text;
    }
    if (t.text == "not" && at_operator("in", 1)) {
      pos_ += 2;
      return "not in";
    }
    if (t.text == "is") {
      ++pos_;
      return accept("not") ? "is not" : "is";
    }
    return {};
  }

  Result parse_comparison() {
    auto first = parse_arith();
    if (!first) {
      return first;
    }
    std::vector<Expr> chain = operands(std::move(*first));
    std::vector<std::string> ops;
    for (std::string op = comparison_operator(); !op.empty(); op = comparison_operator()) {
      auto operand = parse_arith();
      if (!operand) {
        return operand;
      }
      ops.push_back(std::move(op));
      chain.push_back(std::move(*operand));
    }
    if (ops.empty()) {
      return std::move(chain.front());
    }
    Expr out = make(Kind::kCompare, "", std::move(chain));
    out.ops = std::move(ops);
    return checked(std::move(out));
  }

  Result parse_binary_chain(std::initializer_list<std::string_view> ops, Result (Parser::*next)()) {
    auto lhs = (this->*next)();
    if (!lhs) {
      return lhs;
    }
    while (true) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](auto o) { return at_operator(o); });
      if (op == ops.end()) {
        return lhs;
      }
      ++pos_;
      auto rhs = (this->*next)();
      if (!rhs) {
        return rhs;
      }
      lhs = checked(
          make(Kind::kBinary, std::string(*op), operands(std::move(*lhs), std::move(*rhs))));
      if (!lhs) {
        return lhs;
      }
    }
  }

  Result parse_arith() { return parse_binary_chain({"+", "-"}, &Parser::parse_term); }
  Result parse_term() { return parse_binary_chain({"*", "//", "/", "%"}, &Parser::parse_factor); }

  Result parse_factor() {
    for (std::string_view op : {"-", "+"}) {
      if (accept(op)) {
        const Nesting nesting(nesting_);
        if (nesting_ > kMaxNesting) {
          return too_deep();
        }
        auto operand = parse_factor();
        if (!operand) {
          return operand;
        }
        return checked(make(Kind::kUnary, std::string(op), operands(std::move(*operand))));
      }
    }
    auto base = parse_postfix();
    if (!base || !accept("**")) {
      return base;
    }
    const Nesting nesting(nesting_);
    if (nesting_ > kMaxNesting) {
      return too_deep();
    }
    auto exponent = parse_factor(); // right associative; "2 ** -1" is allowed
    if (!exponent) {
      return exponent;
    }
    return checked(make(Kind::kBinary, "**", operands(std::move(*base), std::move(*exponent))));
  }

  Result parse_postfix() {
    auto e = parse_atom();
    while (e) {
      // Arguments and subscripts nest; f(a)(b)[c] is three levels side by side.
      const Nesting nesting(nesting_);
      if (nesting_ > kMaxNesting && (at_operator("(") || at_operator("["))) {
        return too_deep();
      }
      if (accept("(")) {
        if (e->kind != Kind::kName && e->kind != Kind::kAttribute) {
          return error("only names and attributes can be called");
        }
        std::vector<Expr> children;
        children.push_back(std::move(*e));
        if (!accept(")")) {
          do {
            auto arg = parse_or();
            if (!arg) {
              return arg;
            }
            children.push_back(std::move(*arg));
          } while (accept(","));
          if (!accept(")")) {
            return error("expected ')' after call arguments, got '" + peek().text + "'");
          }
        }
        e = checked(make(Kind::kCall, "", std::move(children)));
      } else if (accept(".")) {
        if (peek().kind != TokenKind::kName) {
          return error("expected an attribute name after '.'");
        }
        std::string name = tokens_[pos_++].text;
        e = checked(make(Kind::kAttribute, std::move(name), operands(std::move(*e))));
      } else if (accept("[")) {
        auto index = parse_or();
        if (!index) {
          return index;
        }
        if (!accept("]")) {
          return error("expected ']' after a subscript, got '" + peek().text + "'");
        }
        e = checked(make(Kind::kSubscript, "", operands(std::move(*e), std::move(*index))));
      } else {
        break;
      }
    }
    return e;
  }

  Result parse_atom() {
    const Token& t = peek();
    switch (t.kind) {
    case TokenKind::kName:
    case TokenKind::kString: {
      ++pos_;
      return make(t.kind == TokenKind::kName ? Kind::kName : Kind::kString, t.text, {});
    }
    case TokenKind::kNumber:
      ++pos_;
      return make(Kind::kNumber, t.text, {});
    case TokenKind::kOperator:
      if (accept("(")) {
        const Nesting nesting(nesting_);
        if (nesting_ > kMaxNesting) {
          return too_deep();
        }
        auto inner = parse_or();
        if (!inner) {
          return inner;
        }
        if (!accept(")")) {
          return error("expected ')', got '" + peek().text + "'");
        }
        inner->parenthesized = true;
        return inner;
      }
      return error("unexpected '" + t.text + "'");
    case TokenKind::kEnd:
      break;
    }
    return error("unexpected end of guard");
  }

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::size_t nesting_ = 0;
};

} // namespace

tl::expected<std::string, GuardError> canonical_integer(std::string_view literal) {
  int base = 10;
  std::string_view digits = literal;
  if (literal.size() > 2 && literal[0] == '0') {
    const char prefix = static_cast<char>(std::tolower(static_cast<unsigned char>(literal[1])));
    base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 10;
    if (base != 10) {
      digits.remove_prefix(2);
    }
  }
  const std::string plain = strip_separators(digits);
  const bool valid =
      separators_ok(digits, base != 10) && !plain.empty() &&
      std::all_of(plain.begin(), plain.end(), [&](char c) { return digit_value(c) < base; });
  if (!valid) {
    return GuardUnexpected(GuardError{"malformed integer '" + std::string(literal) + "'"});
  }
  if (plain.size() > kMaxIntegerDigits) {
    return GuardUnexpected(GuardError{"integer literal of " + std::to_string(plain.size()) +
                                      " digits: at most " + std::to_string(kMaxIntegerDigits) +
                                      " are read"});
  }
  // Python 3 rejects "016"; C reads it as octal 14. Zeros alone are zero in both.
  if (base == 10 && plain.size() > 1 && plain.front() == '0' &&
      plain.find_first_not_of('0') != std::string::npos) {
    return GuardUnexpected(GuardError{"decimal integer '" + std::string(literal) +
                                      "' has a leading zero (octal in C, an error in Python)"});
  }
  if (base == 10) { // already decimal; zeros alone are "0"
    const auto first = plain.find_first_not_of('0');
    return first == std::string::npos ? std::string("0") : plain.substr(first);
  }
  std::vector<std::uint32_t> limbs; // little endian, base kLimb
  for (char c : plain) {
    multiply_add(limbs, static_cast<std::uint64_t>(base),
                 static_cast<std::uint64_t>(digit_value(c)));
  }
  while (!limbs.empty() && limbs.back() == 0) {
    limbs.pop_back();
  }
  if (limbs.empty()) {
    return std::string("0");
  }
  std::string out = std::to_string(limbs.back());
  for (auto it = limbs.rbegin() + 1; it != limbs.rend(); ++it) {
    const std::string part = std::to_string(*it);
    out.append(9 - part.size(), '0').append(part);
  }
  return out;
}

tl::expected<std::string, GuardError> canonical_float(std::string_view literal) {
  constexpr long kMaxExponent = 100000;
  const std::string plain = strip_separators(literal);
  auto fail = [&] {
    return GuardUnexpected(GuardError{"malformed float '" + std::string(literal) + "'"});
  };
  // Each run of digits (whole part, fraction, exponent) separately.
  for (std::size_t start = 0; start <= literal.size();) {
    const auto end = std::min(literal.find_first_of(".eE+-", start), literal.size());
    if (!separators_ok(literal.substr(start, end - start), false)) {
      return fail();
    }
    start = end + 1;
  }
  const auto e_at = plain.find_first_of("eE");
  const std::string mantissa = plain.substr(0, e_at);
  long exponent = 0;
  if (e_at != std::string::npos) {
    std::string_view exp = std::string_view(plain).substr(e_at + 1);
    const bool negative = exp.starts_with('-');
    if (exp.starts_with('-') || exp.starts_with('+')) {
      exp.remove_prefix(1);
    }
    if (exp.empty() || !std::all_of(exp.begin(), exp.end(), is_digit)) {
      return fail();
    }
    for (char c : exp) {
      exponent = exponent * 10 + (c - '0');
      if (exponent > kMaxExponent) {
        return GuardUnexpected(
            GuardError{"float exponent out of range in '" + std::string(literal) + "'"});
      }
    }
    exponent = negative ? -exponent : exponent;
  }
  const auto point = mantissa.find('.');
  const std::string whole = mantissa.substr(0, point);
  const std::string fraction = point == std::string::npos ? "" : mantissa.substr(point + 1);
  std::string significand = whole + fraction;
  if (significand.empty() || !std::all_of(significand.begin(), significand.end(), is_digit)) {
    return fail();
  }
  // value = significand * 10^exponent, with no leading or trailing zeros.
  exponent -= static_cast<long>(fraction.size());
  significand.erase(0, significand.find_first_not_of('0'));
  if (significand.empty()) {
    return std::string("0.0");
  }
  while (significand.back() == '0') {
    significand.pop_back();
    ++exponent;
  }
  const long digits = static_cast<long>(significand.size());
  const long point_at = digits + exponent; // digits before the decimal point
  if (exponent >= 0 && point_at <= 21) {
    return significand + std::string(static_cast<std::size_t>(exponent), '0') + ".0";
  }
  if (exponent < 0 && point_at > 0) {
    const auto at = static_cast<std::size_t>(point_at);
    return significand.substr(0, at) + "." + significand.substr(at);
  }
  if (exponent < 0 && point_at > -7) {
    return "0." + std::string(static_cast<std::size_t>(-point_at), '0') + significand;
  }
  const std::string tail = digits > 1 ? significand.substr(1) : "0";
  return significand.substr(0, 1) + "." + tail + "e" + std::to_string(point_at - 1);
}

tl::expected<Expr, GuardError> parse(std::string_view guard) {
  if (guard.size() > kMaxGuardBytes) {
    return GuardUnexpected(
        GuardError{"guard longer than " + std::to_string(kMaxGuardBytes) + " bytes"});
  }
  auto tokens = Lexer(guard).run();
  if (!tokens) {
    return GuardUnexpected(tokens.error());
  }
  if (tokens->size() == 1) {
    return GuardUnexpected(GuardError{"empty guard"});
  }
  return Parser(std::move(*tokens)).run();
}

} // namespace kcache::cachekey::guard
