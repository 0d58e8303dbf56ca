#pragma once
// Integer expressions over named values: autotune constraints
// ("BM*BK*4 + BK*BN*4 <= 49152"), launch geometry ("ceil_div(M, BM)") and
// buffer sizes ("M*K"). Parsed once, evaluated per variant.
//
//   literals, names, ( ), unary - and !, * / %, + -, < <= > >=, == !=, &&, ||,
//   c ? a : b, and the functions min, max, ceil_div
//
// Evaluation is 64-bit and checked: overflow, division by zero and unknown
// names are errors (values, never exceptions or undefined behaviour). Nesting is
// bounded, so hostile input cannot exhaust the stack.

#include <tl/expected.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

using Bindings = std::map<std::string, std::int64_t, std::less<>>;

class Expression {
public:
  static tl::expected<Expression, std::string> parse(std::string_view text);

  tl::expected<std::int64_t, std::string> evaluate(const Bindings& values) const;
  const std::string& text() const { return text_; }
  // The names it reads, sorted, without duplicates.
  const std::vector<std::string>& names() const { return names_; }

  struct Node;

private:
  Expression(std::string text, std::shared_ptr<const Node> root, std::vector<std::string> names);

  std::string text_;
  std::shared_ptr<const Node> root_;
  std::vector<std::string> names_;
};

} // namespace kcache::compiler
