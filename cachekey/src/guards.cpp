#include "guard_parser.h"

#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/guards.h>

#include <algorithm>
#include <array>
#include <set>

namespace kcache::cachekey {
namespace {

using guard::Expr;
using guard::Kind;
using Unexpected = tl::unexpected<GuardError>;

constexpr std::array<std::string_view, 6> kConstants = {"True", "False", "None",
                                                        "oo",   "zoo",   "nan"};
// Functions (sympy and torch's symbolic helpers) whose value is a number when
// all their arguments are numbers.
constexpr std::array<std::string_view, 12> kNumericFunctions = {
    "Mod", "PythonMod", "FloorDiv", "CeilDiv", "CleanDiv", "Max",
    "Min", "floor",     "ceil",     "Abs",     "abs",      "TruncToInt"};
constexpr std::array<std::string_view, 2> kIndexedTensorMethods = {"size", "stride"};
constexpr std::array<std::string_view, 5> kScalarTensorMethods = {"numel", "dim", "storage_offset",
                                                                  "nelement", "ndimension"};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Renames the names of a parsed guard as GuardNames says.
class Resolver {
public:
  explicit Resolver(const GuardNames& names) : names_(names) {
    for (const auto* map : {&names.symbols, &names.tensors}) {
      for (const auto& [given, canonical] : *map) {
        if (!canonical.empty()) {
          canonical_.insert(canonical);
        }
      }
    }
  }

  tl::expected<void, GuardError> run(Expr& e) const {
    if (e.kind == Kind::kName) {
      return rename(e.text);
    }
    for (std::size_t i = 0; i < e.children.size(); ++i) {
      // A callee name (Eq, Mod, floor) is a function, never a symbol.
      if (e.kind == Kind::kCall && i == 0 && e.children[0].kind == Kind::kName) {
        continue;
      }
      if (auto ok = run(e.children[i]); !ok) {
        return ok;
      }
    }
    return {};
  }

  bool is_tensor(const std::string& resolved) const {
    return std::any_of(names_.tensors.begin(), names_.tensors.end(),
                       [&](const auto& entry) { return entry.second == resolved; });
  }

private:
  tl::expected<void, GuardError> rename(std::string& name) const {
    const auto symbol = names_.symbols.find(name);
    const auto tensor = names_.tensors.find(name);
    if (symbol != names_.symbols.end() && tensor != names_.tensors.end()) {
      return Unexpected(GuardError{"'" + name + "' is both a symbol and an input of the graph"});
    }
    if (symbol != names_.symbols.end()) {
      name = symbol->second;
      return {};
    }
    if (tensor != names_.tensors.end()) {
      if (tensor->second.empty()) {
        return Unexpected(GuardError{"the graph has several inputs named '" + name + "'"});
      }
      name = tensor->second;
      return {};
    }
    if (contains(kConstants, name)) {
      return {};
    }
    if (names_.closed) {
      return Unexpected(
          GuardError{"unknown name '" + name + "': neither a symbol nor an input of the graph"});
    }
    if (canonical_.count(name) > 0) {
      return Unexpected(
          GuardError{"'" + name + "' is not a given name but spells the canonical name of one"});
    }
    return {};
  }

  const GuardNames& names_;
  std::set<std::string, std::less<>> canonical_;
};

// Binding strength, loosest first, as in Python.
int precedence(const Expr& e) {
  switch (e.kind) {
  case Kind::kBoolOp:
    return e.text == "or" ? 1 : 2;
  case Kind::kUnary:
    return e.text == "not" ? 3 : 7;
  case Kind::kCompare:
    return 4;
  case Kind::kBinary:
    return e.text == "+" || e.text == "-" ? 5 : e.text == "**" ? 8 : 6;
  case Kind::kCall:
  case Kind::kAttribute:
  case Kind::kSubscript:
    return 9;
  default:
    return 10;
  }
}

std::string render(const Expr& e);

// `e`, parenthesized unless it binds at least as tightly as `at_least`.
std::string operand(const Expr& e, int at_least) {
  return precedence(e) >= at_least ? render(e) : "(" + render(e) + ")";
}

std::string join(const std::vector<Expr>& items, std::size_t from, std::string_view separator,
                 int at_least) {
  std::string out;
  for (std::size_t i = from; i < items.size(); ++i) {
    out += (i > from ? std::string(separator) : std::string()) + operand(items[i], at_least);
  }
  return out;
}

std::string render(const Expr& e) {
  const int p = precedence(e);
  switch (e.kind) {
  case Kind::kUnary:
    return e.text == "not" ? "not " + operand(e.children[0], p)
                           : e.text + operand(e.children[0], p);
  case Kind::kBinary:
    if (e.text == "**") { // right associative; its right side may be unary
      return operand(e.children[0], p + 1) + " ** " + operand(e.children[1], 7);
    }
    return operand(e.children[0], p) + " " + e.text + " " + operand(e.children[1], p + 1);
  case Kind::kBoolOp:
    return join(e.children, 0, " " + e.text + " ", p + 1);
  case Kind::kCompare: {
    std::string out = operand(e.children[0], p + 1);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      out += " " + e.ops[i] + " " + operand(e.children[i + 1], p + 1);
    }
    return out;
  }
  case Kind::kCall:
    return operand(e.children[0], p) + "(" + join(e.children, 1, ", ", 0) + ")";
  case Kind::kAttribute: // "(1).real": "1.real" would read as a float
    return (e.children[0].kind == Kind::kNumber ? "(" + render(e.children[0]) + ")"
                                                : operand(e.children[0], p)) +
           "." + e.text;
  case Kind::kSubscript:
    return operand(e.children[0], p) + "[" + render(e.children[1]) + "]";
  default:
    return e.text;
  }
}

bool is_literal(const Expr& e) {
  if (e.kind == Kind::kUnary && e.text != "not") {
    return e.children[0].kind == Kind::kNumber;
  }
  return e.kind == Kind::kNumber || e.kind == Kind::kString ||
         (e.kind == Kind::kName && contains(kConstants, e.text));
}

// True when `e` is a number (a literal, a symbol, arithmetic over numbers or a
// known scalar-valued call), so `+` and `*` over it commute.
bool is_numeric(const Expr& e, const Resolver& names) {
  auto all_numeric = [&](std::size_t from) {
    return std::all_of(e.children.begin() + static_cast<std::ptrdiff_t>(from), e.children.end(),
                       [&](const Expr& c) { return is_numeric(c, names); });
  };
  auto method = [](const Expr& call) -> std::string_view {
    return call.kind == Kind::kCall && call.children[0].kind == Kind::kAttribute
               ? std::string_view(call.children[0].text)
               : std::string_view();
  };
  switch (e.kind) {
  case Kind::kNumber:
    return true;
  case Kind::kName:
    return e.text != "None" && !names.is_tensor(e.text);
  case Kind::kUnary:
    return e.text != "not" && all_numeric(0);
  case Kind::kBinary:
    return all_numeric(0);
  case Kind::kCall: {
    if (e.children[0].kind == Kind::kName) {
      return contains(kNumericFunctions, e.children[0].text) && all_numeric(1);
    }
    const std::size_t args = e.children.size() - 1;
    return (contains(kIndexedTensorMethods, method(e)) && args == 1 && all_numeric(1)) ||
           (contains(kScalarTensorMethods, method(e)) && args == 0);
  }
  case Kind::kSubscript: // x.size()[0]
    return contains(kIndexedTensorMethods, method(e.children[0])) &&
           e.children[0].children.size() == 1 && is_numeric(e.children[1], names);
  default:
    return false;
  }
}

std::string flip(const std::string& op) {
  return op == ">" ? "<" : "<=";
}

// Rewrites `e` (children first) into its canonical form; see guards.h.
void canonicalize(Expr& e, const Resolver& names) {
  for (Expr& child : e.children) {
    canonicalize(child, names);
  }
  auto by_rendering = [](const Expr& a, const Expr& b) { return render(a) < render(b); };
  if (e.kind == Kind::kBoolOp) {
    std::vector<Expr> flat;
    for (Expr& child : e.children) {
      if (child.kind == Kind::kBoolOp && child.text == e.text) {
        std::move(child.children.begin(), child.children.end(), std::back_inserter(flat));
      } else {
        flat.push_back(std::move(child));
      }
    }
    std::stable_sort(flat.begin(), flat.end(), by_rendering);
    e.children = std::move(flat);
  } else if (e.kind == Kind::kCompare) {
    const bool downwards = std::all_of(
        e.ops.begin(), e.ops.end(), [](const std::string& op) { return op == ">" || op == ">="; });
    if (downwards) {
      std::reverse(e.children.begin(), e.children.end());
      std::reverse(e.ops.begin(), e.ops.end());
      std::transform(e.ops.begin(), e.ops.end(), e.ops.begin(), flip);
    }
    if (e.ops.size() == 1 && (e.ops[0] == "==" || e.ops[0] == "!=")) {
      const bool lhs_literal = is_literal(e.children[0]);
      const bool rhs_literal = is_literal(e.children[1]);
      if (lhs_literal != rhs_literal ? lhs_literal : by_rendering(e.children[1], e.children[0])) {
        std::swap(e.children[0], e.children[1]);
      }
    }
  } else if (e.kind == Kind::kBinary && (e.text == "+" || e.text == "*") &&
             is_numeric(e.children[0], names) && is_numeric(e.children[1], names) &&
             by_rendering(e.children[1], e.children[0])) {
    std::swap(e.children[0], e.children[1]);
  }
}

tl::expected<Expr, GuardError> canonical_tree(std::string_view text, const GuardNames& names) {
  auto tree = guard::parse(text);
  const Resolver resolver(names);
  if (tree) {
    if (auto ok = resolver.run(*tree); !ok) {
      tree = Unexpected(ok.error());
    }
  }
  if (!tree) {
    return Unexpected(GuardError{"guard '" + std::string(text) + "': " + tree.error().message});
  }
  canonicalize(*tree, resolver);
  return tree;
}

} // namespace

GuardNames GuardNames::for_graph(const Graph& graph, const SymbolMap& symbols) {
  GuardNames names{symbols, {}, true};
  for (std::size_t position = 0; position < graph.inputs().size(); ++position) {
    const std::string& name = graph.nodes()[graph.inputs()[position]].name;
    const auto [it, fresh] = names.tensors.emplace(name, "in" + std::to_string(position));
    if (!fresh) {
      it->second.clear(); // two inputs of one name: a guard cannot say which
    }
  }
  return names;
}

tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const GuardNames& names) {
  auto tree = canonical_tree(guard, names);
  if (!tree) {
    return Unexpected(tree.error());
  }
  return render(*tree);
}

tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const GuardNames& names) {
  std::vector<std::string> out;
  out.reserve(guards.size());
  for (const std::string& guard : guards) {
    auto tree = canonical_tree(guard, names);
    if (!tree) {
      return Unexpected(tree.error());
    }
    // The set is a conjunction: "a and b" says what {"a", "b"} says.
    if (tree->kind == Kind::kBoolOp && tree->text == "and") {
      std::transform(tree->children.begin(), tree->children.end(), std::back_inserter(out),
                     [](const Expr& e) { return render(e); });
    } else {
      out.push_back(render(*tree));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

tl::expected<std::string, GuardError> normalize_guard(std::string_view guard,
                                                      const SymbolMap& symbols) {
  return normalize_guard(guard, GuardNames{symbols, {}, false});
}

tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const SymbolMap& symbols) {
  return normalize_guards(guards, GuardNames{symbols, {}, false});
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
