// A recursive-descent parser (one function per precedence level) building an
// immutable tree; evaluation walks it with checked arithmetic.

#include <kcache/compiler/expression.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace kcache::compiler {

struct Expression::Node {
  enum class Kind { kNumber, kName, kUnary, kBinary, kTernary, kCall };
  Kind kind = Kind::kNumber;
  std::int64_t number = 0;
  std::string name; // kName; operator or function name otherwise
  std::vector<std::shared_ptr<const Node>> children;
};

namespace {

using Node = Expression::Node;
using NodePtr = std::shared_ptr<const Node>;
using Result = tl::expected<std::int64_t, std::string>;

constexpr int kMaxDepth = 64;

class Parser {
public:
  explicit Parser(std::string_view text) : text_(text) {}

  tl::expected<NodePtr, std::string> parse_all() {
    auto node = ternary(0);
    if (node && (skip_space(), pos_ != text_.size())) {
      return fail("unexpected '" + std::string(text_.substr(pos_, 1)) + "'");
    }
    return node;
  }
  const std::set<std::string>& names() const { return names_; }

private:
  using Parsed = tl::expected<NodePtr, std::string>;

  tl::unexpected<std::string> fail(const std::string& what) const {
    return tl::unexpected("expression '" + std::string(text_) + "': " + what + " at offset " +
                          std::to_string(pos_));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) {
      ++pos_;
    }
  }

  // Consumes `op` if it comes next (and is not the start of a longer operator).
  bool accept(std::string_view op) {
    skip_space();
    if (text_.substr(pos_, op.size()) != op) {
      return false;
    }
    const char next = pos_ + op.size() < text_.size() ? text_[pos_ + op.size()] : '\0';
    if ((op == "<" || op == ">" || op == "!") && next == '=') {
      return false;
    }
    if ((op == "&" && next == '&') || (op == "|" && next == '|')) {
      return false;
    }
    pos_ += op.size();
    return true;
  }

  static NodePtr make(Node::Kind kind, std::string name, std::vector<NodePtr> children) {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->name = std::move(name);
    n->children = std::move(children);
    return n;
  }

  Parsed ternary(int depth) {
    if (depth > kMaxDepth) {
      return fail("nested too deeply");
    }
    auto cond = binary(0, depth);
    if (!cond || !accept("?")) {
      return cond;
    }
    auto yes = ternary(depth + 1);
    if (!yes) {
      return yes;
    }
    if (!accept(":")) {
      return fail("expected ':'");
    }
    auto no = ternary(depth + 1);
    if (!no) {
      return no;
    }
    return make(Node::Kind::kTernary, "?:", {*cond, *yes, *no});
  }

  // Binary operators by precedence level, loosest first.
  Parsed binary(std::size_t level, int depth) {
    static const std::vector<std::vector<std::string_view>> kLevels = {
        {"||"}, {"&&"}, {"==", "!="}, {"<=", ">=", "<", ">"}, {"+", "-"}, {"*", "/", "%"}};
    if (level == kLevels.size()) {
      return unary(depth);
    }
    auto left = binary(level + 1, depth);
    while (left) {
      const auto& ops = kLevels[level];
      const auto op =
          std::find_if(ops.begin(), ops.end(), [&](std::string_view o) { return accept(o); });
      if (op == ops.end()) {
        break;
      }
      auto right = binary(level + 1, depth);
      if (!right) {
        return right;
      }
      left = make(Node::Kind::kBinary, std::string(*op), {*left, *right});
    }
    return left;
  }

  Parsed unary(int depth) {
    if (depth > kMaxDepth) {
      return fail("nested too deeply");
    }
    for (std::string_view op : {"-", "!", "+"}) {
      if (accept(op)) {
        auto operand = unary(depth + 1);
        if (!operand || op == "+") {
          return operand;
        }
        return make(Node::Kind::kUnary, std::string(op), {*operand});
      }
    }
    return primary(depth);
  }

  Parsed primary(int depth) {
    skip_space();
    if (accept("(")) {
      auto inner = ternary(depth + 1);
      if (inner && !accept(")")) {
        return fail("expected ')'");
      }
      return inner;
    }
    if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
      std::int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
          return fail("number too large");
        }
        ++pos_;
      }
      auto n = std::make_shared<Node>();
      n->number = value;
      return n;
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '_')) {
      ++pos_;
    }
    if (pos_ == start) {
      return fail(pos_ == text_.size() ? "unexpected end" : "expected a number or a name");
    }
    std::string name(text_.substr(start, pos_ - start));
    if (!accept("(")) {
      names_.insert(name);
      return make(Node::Kind::kName, std::move(name), {});
    }
    if (name != "min" && name != "max" && name != "ceil_div") {
      return fail("unknown function '" + name + "' (valid: min, max, ceil_div)");
    }
    std::vector<NodePtr> args;
    do {
      auto arg = ternary(depth + 1);
      if (!arg) {
        return arg;
      }
      args.push_back(*arg);
    } while (accept(","));
    if (!accept(")")) {
      return fail("expected ')' after the arguments of " + name);
    }
    if (args.size() != 2) {
      return fail(name + " takes 2 arguments");
    }
    return make(Node::Kind::kCall, std::move(name), std::move(args));
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::set<std::string> names_;
};

Result eval(const Node& n, const Bindings& values) {
  switch (n.kind) {
  case Node::Kind::kNumber:
    return n.number;
  case Node::Kind::kName: {
    const auto it = values.find(n.name);
    if (it == values.end()) {
      return tl::unexpected("no value for '" + n.name + "'");
    }
    return it->second;
  }
  case Node::Kind::kUnary: {
    auto v = eval(*n.children[0], values);
    if (!v) {
      return v;
    }
    if (n.name == "!") {
      return static_cast<std::int64_t>(*v == 0);
    }
    std::int64_t out = 0;
    if (__builtin_sub_overflow(std::int64_t{0}, *v, &out)) {
      return tl::unexpected(std::string("overflow"));
    }
    return out;
  }
  case Node::Kind::kTernary: {
    auto c = eval(*n.children[0], values);
    if (!c) {
      return c;
    }
    return eval(*n.children[*c != 0 ? 1 : 2], values);
  }
  case Node::Kind::kBinary:
  case Node::Kind::kCall:
    break;
  }
  // Short-circuit logic first: the right side may be undefined when unneeded.
  auto a = eval(*n.children[0], values);
  if (!a) {
    return a;
  }
  if (n.name == "&&" && *a == 0) {
    return 0;
  }
  if (n.name == "||" && *a != 0) {
    return 1;
  }
  auto b = eval(*n.children[1], values);
  if (!b) {
    return b;
  }
  const std::int64_t x = *a, y = *b;
  std::int64_t out = 0;
  const std::string& op = n.name;
  if (op == "+" || op == "-" || op == "*") {
    const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &out)
                          : op == "-" ? __builtin_sub_overflow(x, y, &out)
                                      : __builtin_mul_overflow(x, y, &out);
    if (overflow) {
      return tl::unexpected("overflow in " + std::to_string(x) + " " + op + " " +
                            std::to_string(y));
    }
    return out;
  }
  if (op == "/" || op == "%" || op == "ceil_div") {
    if (y == 0) {
      return tl::unexpected(std::string("division by zero"));
    }
    if (x == INT64_MIN && y == -1) {
      return tl::unexpected(std::string("overflow in division"));
    }
    if (op == "ceil_div") {
      const std::int64_t q = x / y;
      return q + static_cast<std::int64_t>((x % y != 0) && ((x < 0) == (y < 0)));
    }
    return op == "/" ? x / y : x % y;
  }
  if (op == "min") {
    return std::min(x, y);
  }
  if (op == "max") {
    return std::max(x, y);
  }
  if (op == "&&" || op == "||") {
    return static_cast<std::int64_t>(y != 0);
  }
  const bool r = op == "=="   ? x == y
                 : op == "!=" ? x != y
                 : op == "<"  ? x < y
                 : op == "<=" ? x <= y
                 : op == ">"  ? x > y
                              : x >= y;
  return static_cast<std::int64_t>(r);
}

} // namespace

Expression::Expression(std::string text, std::shared_ptr<const Node> root,
                       std::vector<std::string> names)
    : text_(std::move(text)), root_(std::move(root)), names_(std::move(names)) {}

tl::expected<Expression, std::string> Expression::parse(std::string_view text) {
  Parser parser(text);
  auto root = parser.parse_all();
  if (!root) {
    return tl::unexpected(root.error());
  }
  return Expression(std::string(text), std::move(*root),
                    std::vector<std::string>(parser.names().begin(), parser.names().end()));
}

tl::expected<std::int64_t, std::string> Expression::evaluate(const Bindings& values) const {
  auto v = eval(*root_, values);
  if (!v) {
    return tl::unexpected("'" + text_ + "': " + v.error());
  }
  return v;
}

} // namespace kcache::compiler
