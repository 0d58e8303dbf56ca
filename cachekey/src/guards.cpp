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
using GuardUnexpected = tl::unexpected<GuardError>;

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
    for (const auto& [given, canonical] : names.symbols) {
      symbols_.insert(canonical);
    }
    for (const auto& [given, canonical] : names.tensors) {
      if (!canonical.empty()) {
        tensors_.insert(canonical);
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

  // On resolved names. A kept (unknown) name never spells a canonical one.
  bool is_symbol(const std::string& resolved) const { return symbols_.count(resolved) > 0; }
  bool is_tensor(const std::string& resolved) const { return tensors_.count(resolved) > 0; }

private:
  tl::expected<void, GuardError> rename(std::string& name) const {
    const auto symbol = names_.symbols.find(name);
    const auto tensor = names_.tensors.find(name);
    if (symbol != names_.symbols.end() && tensor != names_.tensors.end()) {
      return GuardUnexpected(
          GuardError{"'" + name + "' is both a symbol and an input of the graph"});
    }
    if (symbol != names_.symbols.end()) {
      name = symbol->second;
      return {};
    }
    if (tensor != names_.tensors.end()) {
      if (tensor->second.empty()) {
        return GuardUnexpected(GuardError{"the graph has several inputs named '" + name + "'"});
      }
      name = tensor->second;
      return {};
    }
    if (contains(kConstants, name)) {
      return {};
    }
    if (names_.closed) {
      return GuardUnexpected(
          GuardError{"unknown name '" + name + "': neither a symbol nor an input of the graph"});
    }
    if (symbols_.count(name) > 0 || tensors_.count(name) > 0) {
      return GuardUnexpected(
          GuardError{"'" + name + "' is not a given name but spells the canonical name of one"});
    }
    return {};
  }

  const GuardNames& names_;
  std::set<std::string, std::less<>> symbols_; // canonical names
  std::set<std::string, std::less<>> tensors_;
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

// Appends the rendering of `e` (already rendered), parenthesized unless it
// binds at least as tightly as `at_least`.
void put(std::string& out, const Expr& e, int at_least) {
  const bool wrap = precedence(e) < at_least;
  if (wrap) {
    out += '(';
  }
  out += e.rendered;
  if (wrap) {
    out += ')';
  }
}

// The spelling of `e` from the spellings of its children: each node is
// rendered once, so deep trees cost no more than their text.
std::string render(const Expr& e) {
  const int p = precedence(e);
  const auto& c = e.children;
  std::string out;
  std::size_t size = e.text.size() + 8;
  for (const Expr& child : c) {
    size += child.rendered.size() + 8;
  }
  out.reserve(size);
  switch (e.kind) {
  case Kind::kUnary:
    out += e.text == "not" ? "not " : e.text;
    put(out, c[0], p);
    break;
  case Kind::kBinary:
    if (e.text == "**") { // right associative; its right side may be unary
      put(out, c[0], p + 1);
      out += " ** ";
      put(out, c[1], 7);
    } else {
      put(out, c[0], p);
      out += ' ';
      out += e.text;
      out += ' ';
      put(out, c[1], p + 1);
    }
    break;
  case Kind::kBoolOp:
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (i > 0) {
        out += ' ';
        out += e.text;
        out += ' ';
      }
      put(out, c[i], p + 1);
    }
    break;
  case Kind::kCompare:
    put(out, c[0], p + 1);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      out += ' ';
      out += e.ops[i];
      out += ' ';
      put(out, c[i + 1], p + 1);
    }
    break;
  case Kind::kCall:
    put(out, c[0], p);
    out += '(';
    for (std::size_t i = 1; i < c.size(); ++i) {
      if (i > 1) {
        out += ", ";
      }
      put(out, c[i], 0);
    }
    out += ')';
    break;
  case Kind::kAttribute: // "(1).real": "1.real" would read as a float
    put(out, c[0], c[0].kind == Kind::kNumber ? precedence(c[0]) + 1 : p);
    out += '.';
    out += e.text;
    break;
  case Kind::kSubscript:
    put(out, c[0], p);
    out += '[';
    out += c[1].rendered;
    out += ']';
    break;
  default:
    out = e.text;
  }
  return out;
}

bool is_literal(const Expr& e) {
  if (e.kind == Kind::kUnary && e.text != "not") {
    return e.children[0].kind == Kind::kNumber;
  }
  return e.kind == Kind::kNumber || e.kind == Kind::kString ||
         (e.kind == Kind::kName && contains(kConstants, e.text));
}

bool is_zero(const Expr& e) {
  return e.kind == Kind::kNumber && (e.text == "0" || e.text == "0.0");
}

// A tensor method call on a graph input: `in0.size(0)`, `in0.numel()`; the
// method's name is returned, or "" for anything else.
std::string_view tensor_method(const Expr& call, const Resolver& names) {
  if (call.kind != Kind::kCall || call.children[0].kind != Kind::kAttribute) {
    return {};
  }
  const Expr& receiver = call.children[0].children[0];
  return receiver.kind == Kind::kName && names.is_tensor(receiver.text)
             ? std::string_view(call.children[0].text)
             : std::string_view();
}

// Whether `e` is provably a number: a literal, a symbol, arithmetic over
// numbers, a known numeric function of numbers or a size of a graph input.
// Names not known to be symbols are not numbers: they may be tuples, strings
// or tensors, for which `+` concatenates or broadcasts. Children come first.
bool numeric(const Expr& e, const Resolver& names) {
  auto all_numeric = [&](std::size_t from) {
    return std::all_of(e.children.begin() + static_cast<std::ptrdiff_t>(from), e.children.end(),
                       [](const Expr& c) { return c.numeric; });
  };
  switch (e.kind) {
  case Kind::kNumber:
    return true;
  case Kind::kName:
    return names.is_symbol(e.text) ||
           (contains(kConstants, e.text) && e.text != "None"); // True, oo, nan, ...
  case Kind::kUnary:
    return e.text != "not" && all_numeric(0);
  case Kind::kBinary:
    return all_numeric(0);
  case Kind::kCall: {
    if (e.children[0].kind == Kind::kName) {
      return contains(kNumericFunctions, e.children[0].text) && all_numeric(1);
    }
    const std::size_t args = e.children.size() - 1;
    const std::string_view method = tensor_method(e, names);
    return (contains(kIndexedTensorMethods, method) && args == 1 && all_numeric(1)) ||
           (contains(kScalarTensorMethods, method) && args == 0);
  }
  case Kind::kSubscript: // in0.size()[0]
    return contains(kIndexedTensorMethods, tensor_method(e.children[0], names)) &&
           e.children[0].children.size() == 1 && e.children[1].numeric;
  default:
    return false;
  }
}

// A quiet integer, bool or float: evaluates without raising.
bool quiet_number(const Expr& e) {
  return e.quiet && e.numeric;
}
// A quiet value that `==`, `!=` and `is` compare without raising.
bool quiet_plain(const Expr& e) {
  return e.quiet &&
         (e.numeric || e.kind == Kind::kString || (e.kind == Kind::kName && e.text == "None"));
}

// Whether evaluating `e` and testing its truth provably never raises, so its
// place among the operands of `and` / `or` changes nothing but which operand
// short-circuits. Conservative: symbols (integers), literals, `+ - *` over
// them, division by a nonzero literal, comparisons of those, and not/and/or of
// those. Calls, attributes, subscripts, `**`, tensors, unknown names and the
// sympy constants oo, zoo, nan (whose comparisons may raise) are not quiet.
// Children come first.
bool quiet(const Expr& e, const Resolver& names) {
  const auto& c = e.children;
  switch (e.kind) {
  case Kind::kNumber:
  case Kind::kString:
    return true;
  case Kind::kName:
    return names.is_symbol(e.text) || e.text == "True" || e.text == "False" || e.text == "None";
  case Kind::kUnary:
    return e.text == "not" ? c[0].quiet : quiet_number(c[0]);
  case Kind::kBinary:
    if (e.text == "+" || e.text == "-" || e.text == "*") {
      return quiet_number(c[0]) && quiet_number(c[1]);
    }
    if (e.text == "/" || e.text == "//" || e.text == "%") {
      return quiet_number(c[0]) && c[1].kind == Kind::kNumber && !is_zero(c[1]);
    }
    return false; // "**": 0 ** -1 raises
  case Kind::kBoolOp:
    return std::all_of(c.begin(), c.end(), [](const Expr& x) { return x.quiet; });
  case Kind::kCompare:
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      const std::string& op = e.ops[i];
      const bool ordering = op == "<" || op == "<=" || op == ">" || op == ">=";
      const bool equality = op == "==" || op == "!=" || op == "is" || op == "is not";
      if (ordering ? !(quiet_number(c[i]) && quiet_number(c[i + 1]))
                   : !(equality && quiet_plain(c[i]) && quiet_plain(c[i + 1]))) {
        return false;
      }
    }
    return true;
  default:
    return false;
  }
}

std::string flip(const std::string& op) {
  if (op == ">") {
    return "<";
  }
  if (op == ">=") {
    return "<=";
  }
  return op; // only chains of > and >= are flipped
}

bool by_rendering(const Expr& a, const Expr& b) {
  return a.rendered < b.rendered;
}

// Sorts each run of consecutive quiet operands of a boolean operator whose
// truth alone is used. Within such a run, which operand decides is irrelevant
// to the truth of the result (none raises, none has effects), and operands
// that may raise keep their place, so which of them run never changes.
void sort_quiet_runs(std::vector<Expr>& operands) {
  for (auto run = operands.begin(); run != operands.end();) {
    const auto end =
        std::find_if(run, operands.end(), [](const Expr& operand) { return !operand.quiet; });
    // Equal renderings are equal operands: no stable sort needed (and
    // libstdc++ 12's stable_sort trips clang 19's deprecation warnings).
    std::sort(run, end, by_rendering);
    run = end == operands.end() ? end : end + 1;
  }
}

// Rewrites `e` (children first) into its canonical form and renders it; see
// guards.h. `truth_only`: only the truth of `e` matters (the whole guard, the
// operand of `not`, or an operand of `and` / `or` whose truth alone matters),
// not its value: `a or b` returns an operand, so elsewhere its operands keep
// their order.
void canonicalize(Expr& e, const Resolver& names, bool truth_only) {
  const bool children_truth_only =
      (e.kind == Kind::kUnary && e.text == "not") || (e.kind == Kind::kBoolOp && truth_only);
  for (Expr& child : e.children) {
    canonicalize(child, names, children_truth_only);
  }
  if (e.kind == Kind::kBoolOp) {
    // (a or b) or c is a or (b or c) in value and in evaluation order.
    std::vector<Expr> flat;
    for (Expr& child : e.children) {
      if (child.kind == Kind::kBoolOp && child.text == e.text) {
        std::move(child.children.begin(), child.children.end(), std::back_inserter(flat));
      } else {
        flat.push_back(std::move(child));
      }
    }
    e.children = std::move(flat);
    if (truth_only) {
      sort_quiet_runs(e.children);
    }
  } else if (e.kind == Kind::kCompare) {
    // A chain stops at its first false link: `0 >= 2 >= 1 // c` never divides,
    // `1 // c <= 2 <= 0` does. So a chain of three or more turns upwards only
    // when nothing in it can raise; two operands are always both evaluated.
    const bool downwards =
        std::all_of(e.ops.begin(), e.ops.end(),
                    [](const std::string& op) { return op == ">" || op == ">="; }) &&
        (e.ops.size() == 1 || quiet(e, names));
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
  } else if (e.kind == Kind::kBinary && (e.text == "+" || e.text == "*") && e.children[0].numeric &&
             e.children[1].numeric && by_rendering(e.children[1], e.children[0])) {
    std::swap(e.children[0], e.children[1]);
  }
  e.numeric = numeric(e, names);
  e.quiet = quiet(e, names);
  e.rendered = render(e);
  // The children's spellings made this one; theirs are needed no more (the
  // root keeps its children's: normalize_guards may split them off).
  for (Expr& child : e.children) {
    for (Expr& grandchild : child.children) {
      std::string().swap(grandchild.rendered);
    }
  }
}

// Parses, resolves and canonicalizes one guard; appends its rendering, or with
// `split` the renderings of the operands of a top-level `and`.
tl::expected<void, GuardError> append_canonical(std::string_view text, const GuardNames& names,
                                                bool split, std::vector<std::string>& out) {
  auto tree = guard::parse(text);
  const Resolver resolver(names);
  if (tree) {
    if (auto ok = resolver.run(*tree); !ok) {
      tree = GuardUnexpected(ok.error());
    }
  }
  if (!tree) {
    return GuardUnexpected(
        GuardError{"guard '" + std::string(text) + "': " + tree.error().message});
  }
  canonicalize(*tree, resolver, /*truth_only=*/true);
  if (split && tree->kind == Kind::kBoolOp && tree->text == "and") {
    for (Expr& operand : tree->children) {
      out.push_back(std::move(operand.rendered));
    }
  } else {
    out.push_back(std::move(tree->rendered));
  }
  return {};
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
  std::vector<std::string> out;
  if (auto ok = append_canonical(guard, names, /*split=*/false, out); !ok) {
    return GuardUnexpected(ok.error());
  }
  return std::move(out.front());
}

tl::expected<std::vector<std::string>, GuardError>
normalize_guards(std::span<const std::string> guards, const GuardNames& names) {
  if (guards.size() > kMaxGuards) {
    return GuardUnexpected(GuardError{std::to_string(guards.size()) +
                                      " guards: a set holds at most " +
                                      std::to_string(kMaxGuards)});
  }
  std::vector<std::string> out;
  out.reserve(guards.size());
  for (const std::string& guard : guards) {
    // The set is a conjunction: "a and b" says what {"a", "b"} says.
    if (auto ok = append_canonical(guard, names, /*split=*/true, out); !ok) {
      return GuardUnexpected(ok.error());
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
