// A differential key fuzzer over manifests: the graphs and guards a client
// hands to KeyBuilder. Random small programs (integer ops over graph inputs,
// some in place, random or stateful; guards over the inputs' sizes) are
// mutated by transformations that keep or change what they compute, and a
// reference evaluator written here, which knows nothing of the normalizer,
// says what each computes: guard truth, output values and types, input
// layouts and the inputs' final values, on random inputs. Then:
//   - one key implies one evaluation on every probe (no false hit), for each
//     pair and across all programs of the run;
//   - transformations the key documents as normalized keep the key (no
//     needless miss): renamings, spelling, listing order, and/or operands
//     that cannot raise, sides of comparisons, +/* over numbers, splitting
//     and/or merging guards, explicit row-major strides.
// KCACHE_MANIFEST_FUZZ_SEED and KCACHE_MANIFEST_FUZZ_ROUNDS change the run.

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/graph_json.h>
#include <kcache/cachekey/key_manifest.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

namespace kcache::cachekey {
namespace {

using Rng = std::mt19937_64;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

std::size_t pick(Rng& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % n);
}
bool chance(Rng& rng, int percent) {
  return static_cast<int>(rng() % 100) < percent;
}
template <typename T> const T& pick_of(Rng& rng, const std::vector<T>& items) {
  return items[pick(rng, items.size())];
}

// ---------------------------------------------------------------- programs

// What each op does, for the evaluator (values are int64, one per tensor).
enum class Sem {
  kAdd,
  kSub,
  kMul,
  kMax,
  kMin,
  kNeg,
  kAbs,
  kAddK,
  kMulK,
  kSubK,
  kFull,
  kMinMax,
  kView,
  kAddInPlace,
  kMulKInPlace,
  kCopyInPlace,
  kRand,
  kAccumulate
};

struct OpInfo {
  std::string_view op;
  Sem sem;
  std::size_t arity;
  std::string_view attr; // the integer attribute, "" when none
  bool effect;           // writes an argument, draws random numbers or keeps state
  bool flagged;          // a custom op: "effectful": true says so, not its name
  std::uint32_t outputs;
};

constexpr std::array<OpInfo, 18> kOps = {{
    {"aten.add.Tensor", Sem::kAdd, 2, "", false, false, 1},
    {"aten.sub.Tensor", Sem::kSub, 2, "", false, false, 1},
    {"aten.mul.Tensor", Sem::kMul, 2, "", false, false, 1},
    {"aten.maximum", Sem::kMax, 2, "", false, false, 1},
    {"aten.minimum", Sem::kMin, 2, "", false, false, 1},
    {"aten.neg", Sem::kNeg, 1, "", false, false, 1},
    {"aten.abs", Sem::kAbs, 1, "", false, false, 1},
    {"aten.add.Scalar", Sem::kAddK, 1, "other", false, false, 1},
    {"aten.mul.Scalar", Sem::kMulK, 1, "other", false, false, 1},
    {"aten.sub.Scalar", Sem::kSubK, 1, "other", false, false, 1},
    {"aten.full", Sem::kFull, 0, "fill_value", false, false, 1},
    {"mylib.minmax", Sem::kMinMax, 2, "", false, false, 2},
    {"aten.view", Sem::kView, 1, "", false, false, 1}, // aliases its argument
    {"aten.add_.Tensor", Sem::kAddInPlace, 2, "", true, false, 1},
    {"aten.mul_.Scalar", Sem::kMulKInPlace, 1, "other", true, false, 1},
    {"aten.copy_", Sem::kCopyInPlace, 2, "", true, false, 1},
    {"aten.rand_like", Sem::kRand, 1, "", true, false, 1},
    {"mylib.accumulate", Sem::kAccumulate, 1, "", true, true, 1},
}};

int op_index(Sem sem) {
  return static_cast<int>(
      std::find_if(kOps.begin(), kOps.end(), [&](const OpInfo& o) { return o.sem == sem; }) -
      kOps.begin());
}

struct Ref {
  std::size_t id = 0; // index into Program::nodes
  std::uint32_t output = 0;
  friend bool operator==(const Ref&, const Ref&) = default;
};

struct PNode {
  std::string name;
  int op = -1; // index into kOps; -1: a graph input
  std::vector<Ref> args;
  std::int64_t k = 0; // the op's integer attribute
  TensorType type;    // an input's declared type; each output's type
  bool input() const { return op < 0; }
  bool effect() const { return op >= 0 && kOps[static_cast<std::size_t>(op)].effect; }
  const OpInfo& info() const { return kOps[static_cast<std::size_t>(op)]; }
  friend bool operator==(const PNode&, const PNode&) = default;
};

// A guard expression as Python reads it.
struct GExpr {
  enum class K { kInt, kFloat, kConst, kSym, kTensor, kUnary, kBin, kBool, kCmp, kCall };
  K kind = K::kInt;
  // kSym: the symbol; kConst: True/False; kUnary/kBin/kBool: the operator;
  // kCall: Max/Min; kTensor: size, stride, numel or "size()[]".
  std::string text;
  std::int64_t value = 0;       // kInt: the value; kFloat: the mantissa; kTensor: the dim
  int exp10 = 0;                // kFloat: value * 10^exp10
  std::size_t input = 0;        // kTensor: the input's node id
  std::vector<std::string> ops; // kCmp
  std::vector<GExpr> kids;
  friend bool operator==(const GExpr&, const GExpr&) = default;
};
using K = GExpr::K;

// Graph inputs come first (in positional order), then the nodes as listed.
struct Program {
  std::vector<PNode> nodes;
  std::vector<Ref> outputs;
  std::vector<GExpr> guards;
  friend bool operator==(const Program&, const Program&) = default;
};

const std::vector<std::string> kSymbolNames = {"n", "m", "batch", "seq", "s0", "s1", "s2", "u0"};
const std::vector<std::string> kInputNames = {"x", "y", "w", "in0", "in1", "arg"};

std::vector<std::string> node_names() {
  std::vector<std::string> out(24);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = "v" + std::to_string(i);
  }
  return out;
}

std::size_t input_count(const Program& p) {
  return static_cast<std::size_t>(
      std::count_if(p.nodes.begin(), p.nodes.end(), [](const PNode& n) { return n.input(); }));
}

bool has_effects(const Program& p) {
  return std::any_of(p.nodes.begin(), p.nodes.end(), [](const PNode& n) { return n.effect(); });
}

std::vector<std::string> symbols_of(const Program& p) {
  std::vector<std::string> out;
  for (const PNode& n : p.nodes) {
    for (const auto* dims : {&n.type.shape, &n.type.strides}) {
      for (const Dim& d : *dims) {
        if (d.is_symbol() &&
            std::find(out.begin(), out.end(), std::get<std::string>(d.value)) == out.end()) {
          out.push_back(std::get<std::string>(d.value));
        }
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- generator

GExpr leaf_int(std::int64_t v) {
  GExpr e;
  e.kind = K::kInt;
  e.value = v;
  return e;
}
GExpr node_of(K kind, std::string text, std::vector<GExpr> kids) {
  GExpr e;
  e.kind = kind;
  e.text = std::move(text);
  e.kids = std::move(kids);
  return e;
}

struct GuardGen {
  Rng& rng;
  const Program& p;
  std::vector<std::string> symbols;
  bool quiet = false; // only what cannot raise: symbols, integers, + - *

  std::int64_t literal() {
    static const std::vector<std::int64_t> kCommon = {0, 1, 2, 3, 4, 8, 16, 32, 64, 128};
    return chance(rng, 60) ? pick_of(rng, kCommon) : static_cast<std::int64_t>(rng() % 21);
  }

  GExpr tensor_method() {
    GExpr e;
    e.kind = K::kTensor;
    e.input = pick(rng, input_count(p));
    const std::size_t rank = p.nodes[e.input].type.shape.size();
    static const std::vector<std::string> kMethods = {"size", "size", "stride", "numel",
                                                      "size()[]"};
    e.text = pick_of(rng, kMethods);
    e.value = static_cast<std::int64_t>(pick(rng, rank));
    return e;
  }

  GExpr number(int depth) {
    if (quiet) {
      if (depth <= 0 || chance(rng, 50)) {
        return symbols.empty() || chance(rng, 40) ? leaf_int(literal())
                                                  : node_of(K::kSym, pick_of(rng, symbols), {});
      }
      static const std::vector<std::string> kQuiet = {"+", "-", "*"};
      return node_of(K::kBin, pick_of(rng, kQuiet), {number(depth - 1), number(depth - 1)});
    }
    if (depth <= 0 || chance(rng, 40)) {
      const int r = static_cast<int>(rng() % 100);
      if (r < 50 && !symbols.empty()) {
        GExpr e;
        e.kind = K::kSym;
        e.text = pick_of(rng, symbols);
        return e;
      }
      if (r < 80) {
        return leaf_int(literal());
      }
      if (r < 94) {
        return tensor_method();
      }
      if (r < 98) {
        GExpr e;
        e.kind = K::kFloat;
        e.value = static_cast<std::int64_t>(1 + rng() % 30);
        e.exp10 = -static_cast<int>(rng() % 3);
        return e;
      }
      GExpr e;
      e.kind = K::kConst;
      e.text = chance(rng, 50) ? "True" : "False";
      return e;
    }
    const int r = static_cast<int>(rng() % 100);
    if (r < 10) {
      return node_of(K::kUnary, chance(rng, 85) ? "-" : "+", {number(depth - 1)});
    }
    if (r < 18) {
      GExpr call = node_of(K::kCall, chance(rng, 50) ? "Max" : "Min", {});
      call.kids = {number(depth - 1), number(depth - 1)};
      return call;
    }
    if (r < 22) { // an and/or whose value is used, not only its truth
      return node_of(K::kBool, chance(rng, 50) ? "or" : "and", {number(depth - 1), number(0)});
    }
    if (r < 30) {
      GExpr exponent = leaf_int(static_cast<std::int64_t>(rng() % 4));
      if (chance(rng, 20)) {
        exponent = node_of(K::kUnary, "-", {leaf_int(1)});
      }
      return node_of(K::kBin, "**", {number(depth - 1), std::move(exponent)});
    }
    static const std::vector<std::string> kArith = {"+", "+", "-", "-", "*", "*", "//", "%", "/"};
    return node_of(K::kBin, pick_of(rng, kArith), {number(depth - 1), number(depth - 1)});
  }

  GExpr comparison(int depth) {
    static const std::vector<std::string> kCmp = {"<", "<=", ">", ">=", "==", "!="};
    GExpr e = node_of(K::kCmp, "", {number(depth), number(depth)});
    e.ops.push_back(pick_of(rng, kCmp));
    if (chance(rng, 20)) { // a chain, mostly one way
      const bool up = e.ops[0] == "<" || e.ops[0] == "<=";
      const bool down = e.ops[0] == ">" || e.ops[0] == ">=";
      std::string op = pick_of(rng, kCmp);
      if (chance(rng, 80) && (up || down)) {
        op = up ? (chance(rng, 50) ? "<" : "<=") : (chance(rng, 50) ? ">" : ">=");
      }
      e.ops.push_back(op);
      e.kids.push_back(number(depth));
    }
    return e;
  }

  GExpr truth(int depth) {
    const int r = static_cast<int>(rng() % 100);
    if (depth <= 0 || r < 50) {
      return comparison(depth - 1);
    }
    if (r < 72) {
      GExpr e = node_of(K::kBool, chance(rng, 50) ? "and" : "or", {});
      const std::size_t n = 2 + pick(rng, 2);
      const bool was_quiet = quiet;
      quiet = quiet || chance(rng, 40);
      for (std::size_t i = 0; i < n; ++i) {
        e.kids.push_back(truth(depth - 1));
      }
      quiet = was_quiet;
      return e;
    }
    if (r < 84) {
      return node_of(K::kUnary, "not", {truth(depth - 1)});
    }
    if (r < 88) {
      return number(depth);
    }
    if (r < 95 && !symbols.empty()) {
      // s1 != 0 and s0 % s1 == 0: the order of and/or operands decides
      // whether the division runs.
      const GExpr sym = node_of(K::kSym, pick_of(rng, symbols), {});
      const bool conjunction = chance(rng, 50);
      GExpr test = node_of(K::kCmp, "", {sym, leaf_int(0)});
      test.ops.push_back(conjunction ? "!=" : "==");
      GExpr use = node_of(K::kCmp, "",
                          {node_of(K::kBin, chance(rng, 50) ? "%" : "//", {number(depth - 1), sym}),
                           leaf_int(literal())});
      use.ops.push_back(chance(rng, 50) ? "==" : "<");
      return node_of(K::kBool, conjunction ? "and" : "or", {std::move(test), std::move(use)});
    }
    // -2 <= (2 or s0): an and/or as a value.
    GExpr e = node_of(
        K::kCmp, "",
        {number(0), node_of(K::kBool, chance(rng, 50) ? "or" : "and", {number(0), number(0)})});
    e.ops.push_back(chance(rng, 50) ? "<=" : "==");
    return e;
  }
};

TensorType input_type(Rng& rng, std::vector<std::string>& used) {
  TensorType t{"i64", {}, {}};
  const std::size_t rank = 1 + pick(rng, 2);
  for (std::size_t i = 0; i < rank; ++i) {
    if (chance(rng, 70)) {
      // Reuse a symbol now and then: a shared dim is a constraint.
      std::string name = !used.empty() && chance(rng, 30) ? pick_of(rng, used) : "";
      if (name.empty()) {
        std::vector<std::string> fresh;
        std::copy_if(kSymbolNames.begin(), kSymbolNames.end(), std::back_inserter(fresh),
                     [&](const std::string& s) {
                       return std::find(used.begin(), used.end(), s) == used.end();
                     });
        name = fresh.empty() ? used.front() : pick_of(rng, fresh);
        if (std::find(used.begin(), used.end(), name) == used.end()) {
          used.push_back(name);
        }
      }
      t.shape.push_back(Dim::symbol(name));
    } else {
      t.shape.push_back(Dim::fixed(static_cast<std::int64_t>(1 + rng() % 8)));
    }
  }
  return t;
}

// A random value of the program, as an argument.
Ref any_value(Rng& rng, const Program& p) {
  const PNode& n = p.nodes[pick(rng, p.nodes.size())];
  const auto id = static_cast<std::size_t>(&n - p.nodes.data());
  const std::uint32_t outputs = n.input() ? 1 : n.info().outputs;
  return Ref{id, static_cast<std::uint32_t>(rng() % outputs)};
}

TensorType type_of(const Program& p, const Ref& r) {
  TensorType t = p.nodes[r.id].type;
  t.strides.clear(); // results are contiguous
  return t;
}

bool same_content(const PNode& a, const PNode& b) {
  return a.op == b.op && a.args == b.args && a.k == b.k && a.type == b.type;
}

Program generate(Rng& rng) {
  Program p;
  std::vector<std::string> used_symbols;
  std::vector<std::string> inputs = kInputNames;
  std::shuffle(inputs.begin(), inputs.end(), rng);
  const std::size_t n_inputs = 1 + pick(rng, 3);
  for (std::size_t i = 0; i < n_inputs; ++i) {
    PNode in;
    in.name = inputs[i];
    in.type = input_type(rng, used_symbols);
    p.nodes.push_back(std::move(in));
  }
  std::vector<std::string> names = node_names();
  std::shuffle(names.begin(), names.end(), rng);
  const bool effects = chance(rng, 55);
  const std::size_t n_nodes = 2 + pick(rng, 8);
  for (std::size_t i = 0; i < n_nodes; ++i) {
    // Look-alikes are what a content hash may merge: make some.
    std::vector<std::size_t> pure_nodes;
    for (std::size_t id = n_inputs; id < p.nodes.size(); ++id) {
      if (!p.nodes[id].effect()) {
        pure_nodes.push_back(id);
      }
    }
    PNode node;
    if (!pure_nodes.empty() && chance(rng, 25)) {
      node = p.nodes[pick_of(rng, pure_nodes)];
    } else {
      std::size_t op = 0;
      do {
        op = pick(rng, kOps.size());
      } while (kOps[op].effect && !(effects && chance(rng, 60)));
      node.op = static_cast<int>(op);
      for (std::size_t a = 0; a < kOps[op].arity; ++a) {
        node.args.push_back(any_value(rng, p));
      }
      // Writing one of two look-alikes in place is where merging them by
      // content would go wrong.
      std::vector<std::size_t> twins;
      for (std::size_t u : pure_nodes) {
        for (std::size_t v : pure_nodes) {
          if (u != v && same_content(p.nodes[u], p.nodes[v])) {
            twins.push_back(u);
          }
        }
      }
      if (kOps[op].effect && !twins.empty() && !node.args.empty() && chance(rng, 60)) {
        Ref target{pick_of(rng, twins), 0};
        if (i + 1 < n_nodes && chance(rng, 40)) { // written through a view
          PNode view;
          view.name = names[i++];
          view.op = op_index(Sem::kView);
          view.args = {target};
          view.type = type_of(p, target);
          p.nodes.push_back(std::move(view));
          target = Ref{p.nodes.size() - 1, 0};
        }
        node.args[0] = target;
      }
      node.k = kOps[op].attr.empty() ? 0 : static_cast<std::int64_t>(rng() % 7) - 3;
      node.type = node.args.empty() ? TensorType{"i64", {}, {}} : type_of(p, node.args[0]);
    }
    node.name = names[i];
    p.nodes.push_back(std::move(node));
  }
  const std::size_t n_outputs = 1 + pick(rng, 3);
  for (std::size_t i = 0; i < n_outputs; ++i) {
    p.outputs.push_back(chance(rng, 50) ? Ref{p.nodes.size() - 1, 0} : any_value(rng, p));
  }
  GuardGen gen{rng, p, symbols_of(p)};
  // Few guards: a set that rarely holds hides what the others say.
  static const std::vector<std::size_t> kGuardCounts = {0, 1, 1, 1, 2, 2, 3};
  const std::size_t n_guards = pick_of(rng, kGuardCounts);
  for (std::size_t i = 0; i < n_guards; ++i) {
    p.guards.push_back(gen.truth(static_cast<int>(1 + pick(rng, 3))));
  }
  return p;
}

// ---------------------------------------------------------------- evaluator

// Python values: guards are Python expressions over ints.
struct Py {
  enum class T { kBool, kInt, kFloat } t = T::kInt;
  std::int64_t i = 0;
  double f = 0;
};
enum class Fault { kRaise, kUnknown }; // kUnknown: beyond int64, so not modelled here
using PyResult = tl::expected<Py, Fault>;

Py py_int(std::int64_t v) {
  return Py{Py::T::kInt, v, 0};
}
Py py_bool(bool v) {
  return Py{Py::T::kBool, v ? 1 : 0, 0};
}
Py py_float(double v) {
  return Py{Py::T::kFloat, 0, v};
}
bool is_float(const Py& v) {
  return v.t == Py::T::kFloat;
}
double as_double(const Py& v) {
  return is_float(v) ? v.f : static_cast<double>(v.i);
}
bool truthy(const Py& v) {
  return is_float(v) ? v.f != 0.0 : v.i != 0;
}
tl::unexpected<Fault> raise() {
  return tl::unexpected(Fault::kRaise);
}
tl::unexpected<Fault> unknown() {
  return tl::unexpected(Fault::kUnknown);
}

// Python's float divmod (floatobject.c), so // and % on floats read alike.
std::pair<double, double> float_divmod(double v, double w) {
  double mod = std::fmod(v, w);
  double div = (v - mod) / w;
  if (mod != 0.0) {
    if ((w < 0) != (mod < 0)) {
      mod += w;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, w);
  }
  double floordiv = 0;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) {
      floordiv += 1.0;
    }
  } else {
    floordiv = std::copysign(0.0, v / w);
  }
  return {floordiv, mod};
}

PyResult int_power(std::int64_t base, std::int64_t exponent) {
  if (exponent < 0) {
    if (base == 0) {
      return raise(); // ZeroDivisionError
    }
    return py_float(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  if (base == 0 || base == 1) {
    return py_int(exponent == 0 ? 1 : base);
  }
  if (base == -1) {
    return py_int(exponent % 2 == 0 ? 1 : -1);
  }
  std::int64_t out = 1;
  for (std::int64_t e = 0; e < exponent; ++e) {
    if (__builtin_mul_overflow(out, base, &out)) {
      return unknown();
    }
  }
  return py_int(out);
}

PyResult arith(const std::string& op, const Py& a, const Py& b) {
  if (is_float(a) || is_float(b) || op == "/") {
    const double x = as_double(a), y = as_double(b);
    if (op == "+") {
      return py_float(x + y);
    }
    if (op == "-") {
      return py_float(x - y);
    }
    if (op == "*") {
      return py_float(x * y);
    }
    if (op == "**") {
      if (x == 0.0 && y < 0) {
        return raise();
      }
      if (x < 0 && std::floor(y) != y) {
        return unknown(); // a complex number in Python
      }
      const double r = std::pow(x, y);
      return std::isfinite(r) ? PyResult(py_float(r)) : unknown();
    }
    if (y == 0.0) {
      return raise(); // ZeroDivisionError
    }
    if (op == "/") {
      return py_float(x / y);
    }
    const auto [div, mod] = float_divmod(x, y);
    return py_float(op == "//" ? div : mod);
  }
  const std::int64_t x = a.i, y = b.i;
  std::int64_t r = 0;
  if (op == "+") {
    return __builtin_add_overflow(x, y, &r) ? PyResult(unknown()) : py_int(r);
  }
  if (op == "-") {
    return __builtin_sub_overflow(x, y, &r) ? PyResult(unknown()) : py_int(r);
  }
  if (op == "*") {
    return __builtin_mul_overflow(x, y, &r) ? PyResult(unknown()) : py_int(r);
  }
  if (op == "**") {
    return int_power(x, y);
  }
  if (y == 0) {
    return raise();
  }
  if (y == -1 && x == std::numeric_limits<std::int64_t>::min()) {
    return unknown();
  }
  std::int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    q -= 1;
    m += y;
  }
  return py_int(op == "//" ? q : m);
}

template <typename T> bool holds(const std::string& op, T x, T y) {
  if (op == "<" || op == ">") {
    return op == "<" ? x < y : x > y;
  }
  if (op == "<=" || op == ">=") {
    return op == "<=" ? x <= y : x >= y;
  }
  return op == "==" ? x == y : x != y;
}

// Python compares ints exactly and an int with a float by value.
bool compare(const std::string& op, const Py& a, const Py& b) {
  return is_float(a) || is_float(b) ? holds(op, as_double(a), as_double(b)) : holds(op, a.i, b.i);
}

// A call of the program: per input position, its concrete shape and value.
struct Probe {
  std::vector<std::vector<std::int64_t>> shapes;
  std::vector<std::int64_t> values;
  std::uint64_t seed = 0;
};

// Where a program's symbols and input layouts stand on one probe.
struct Binding {
  std::map<std::string, std::int64_t> symbols;
  std::vector<std::vector<std::int64_t>> shapes, strides; // by input node id (inputs first)
};

PyResult eval_guard(const GExpr& e, const Binding& b) {
  switch (e.kind) {
  case K::kInt:
    return py_int(e.value);
  case K::kFloat:
    return py_float(
        std::strtod((std::to_string(e.value) + "e" + std::to_string(e.exp10)).c_str(), nullptr));
  case K::kConst:
    return py_bool(e.text == "True");
  case K::kSym:
    return py_int(b.symbols.at(e.text));
  case K::kTensor: {
    const auto& shape = b.shapes.at(e.input);
    if (e.text == "numel") {
      std::int64_t n = 1;
      for (std::int64_t d : shape) {
        if (__builtin_mul_overflow(n, d, &n)) {
          return unknown();
        }
      }
      return py_int(n);
    }
    const auto& dims = e.text == "stride" ? b.strides.at(e.input) : shape;
    if (e.value >= static_cast<std::int64_t>(dims.size())) {
      return raise(); // IndexError
    }
    return py_int(dims[static_cast<std::size_t>(e.value)]);
  }
  case K::kUnary: {
    auto v = eval_guard(e.kids[0], b);
    if (!v) {
      return v;
    }
    if (e.text == "not") {
      return py_bool(!truthy(*v));
    }
    if (is_float(*v)) {
      return py_float(e.text == "-" ? -v->f : v->f);
    }
    if (e.text == "-" && v->i == std::numeric_limits<std::int64_t>::min()) {
      return unknown();
    }
    return py_int(e.text == "-" ? -v->i : v->i);
  }
  case K::kBin: {
    auto x = eval_guard(e.kids[0], b);
    if (!x) {
      return x;
    }
    auto y = eval_guard(e.kids[1], b);
    if (!y) {
      return y;
    }
    return arith(e.text, *x, *y);
  }
  case K::kBool: { // returns the deciding operand, as Python does
    PyResult last = py_bool(false);
    for (const GExpr& kid : e.kids) {
      last = eval_guard(kid, b);
      if (!last || truthy(*last) == (e.text == "or")) {
        return last;
      }
    }
    return last;
  }
  case K::kCmp: { // a chain stops at its first false link
    auto left = eval_guard(e.kids[0], b);
    if (!left) {
      return left;
    }
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      auto right = eval_guard(e.kids[i + 1], b);
      if (!right) {
        return right;
      }
      if (!compare(e.ops[i], *left, *right)) {
        return py_bool(false);
      }
      left = right;
    }
    return py_bool(true);
  }
  case K::kCall: {
    auto x = eval_guard(e.kids[0], b);
    if (!x) {
      return x;
    }
    auto y = eval_guard(e.kids[1], b);
    if (!y) {
      return y;
    }
    const bool second = e.text == "Max" ? compare(">", *y, *x) : compare("<", *y, *x);
    return second ? y : x;
  }
  }
  return unknown();
}

// What a program does on one probe.
struct Outcome {
  bool accepted = false;                         // the probe fits the input types
  std::vector<std::vector<std::int64_t>> layout; // per input: shape, then strides
  bool guards_hold = false;
  std::vector<std::int64_t> outputs;
  std::vector<std::vector<std::int64_t>> output_shapes;
  std::vector<std::int64_t> final_inputs; // inputs after in-place writes
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

std::optional<std::int64_t> dim_value(const Dim& d, const Binding& b) {
  if (!d.is_symbol()) {
    return std::get<std::int64_t>(d.value);
  }
  const auto it = b.symbols.find(std::get<std::string>(d.value));
  return it == b.symbols.end() ? std::nullopt : std::optional(it->second);
}

std::int64_t wrap(std::uint64_t v) {
  return static_cast<std::int64_t>(v); // modular since C++20, as int64 tensors wrap
}
std::int64_t add(std::int64_t a, std::int64_t b) {
  return wrap(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t mul(std::int64_t a, std::int64_t b) {
  return wrap(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
std::int64_t neg(std::int64_t a) {
  return wrap(0 - static_cast<std::uint64_t>(a));
}

std::uint64_t mix(std::uint64_t x) { // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Runs the program in listing order. Each tensor is one storage cell; an
// in-place op writes its first argument's cell and returns it, a view shares
// its argument's; a node reads
// its arguments' cells when it runs, and a node named before it is listed
// runs when first needed. Graph outputs are read at the end.
class Machine {
public:
  Machine(const Program& p, const Probe& probe) : p_(p), probe_(probe), cells_of_(p.nodes.size()) {}

  // `guards_only`: stops after the guards (for finding probes where they hold).
  std::optional<Outcome> run(bool guards_only = false) {
    Outcome out;
    if (!bind()) {
      return out; // accepted = false
    }
    out.accepted = true;
    for (std::size_t id = 0; id < binding_.shapes.size(); ++id) {
      std::vector<std::int64_t> l = binding_.shapes[id];
      l.insert(l.end(), binding_.strides[id].begin(), binding_.strides[id].end());
      out.layout.push_back(std::move(l));
    }
    out.guards_hold = true;
    for (const GExpr& g : p_.guards) {
      auto v = eval_guard(g, binding_);
      if (!v && v.error() == Fault::kUnknown) {
        return std::nullopt;
      }
      out.guards_hold = out.guards_hold && v && truthy(*v);
    }
    if (guards_only) {
      return out;
    }
    for (std::size_t id = 0; id < p_.nodes.size(); ++id) {
      run_node(id);
    }
    for (const Ref& r : p_.outputs) {
      out.outputs.push_back(read(r));
      std::vector<std::int64_t> shape;
      const TensorType& t = p_.nodes[r.id].type;
      for (const Dim& d : t.shape) {
        shape.push_back(dim_value(d, binding_).value_or(-1));
      }
      out.output_shapes.push_back(std::move(shape));
    }
    for (std::size_t id = 0; id < p_.nodes.size(); ++id) {
      if (p_.nodes[id].input()) {
        out.final_inputs.push_back(read(Ref{id, 0}));
      }
    }
    return out;
  }

private:
  bool bind() {
    std::size_t position = 0;
    for (std::size_t id = 0; id < p_.nodes.size(); ++id) {
      const PNode& n = p_.nodes[id];
      if (!n.input()) {
        continue;
      }
      if (position >= probe_.shapes.size() ||
          probe_.shapes[position].size() != n.type.shape.size()) {
        return false;
      }
      const auto& concrete = probe_.shapes[position];
      for (std::size_t d = 0; d < concrete.size(); ++d) {
        const Dim& dim = n.type.shape[d];
        if (!dim.is_symbol()) {
          if (std::get<std::int64_t>(dim.value) != concrete[d]) {
            return false;
          }
          continue;
        }
        const auto [it, fresh] =
            binding_.symbols.emplace(std::get<std::string>(dim.value), concrete[d]);
        if (!fresh && it->second != concrete[d]) {
          return false;
        }
      }
      binding_.shapes.push_back(concrete);
      cells_of_[id] = {new_cell(probe_.values[position])};
      ++position;
    }
    if (position != probe_.shapes.size()) {
      return false;
    }
    binding_.strides.resize(binding_.shapes.size());
    for (std::size_t id = 0; id < binding_.shapes.size(); ++id) {
      const auto& shape = binding_.shapes[id];
      const TensorType& t = p_.nodes[id].type;
      std::vector<std::int64_t> strides(shape.size());
      if (t.strides.empty()) {
        std::int64_t step = 1;
        for (std::size_t d = shape.size(); d-- > 0;) {
          strides[d] = step;
          step = mul(step, shape[d]);
        }
      } else {
        for (std::size_t d = 0; d < shape.size(); ++d) {
          strides[d] = dim_value(t.strides[d], binding_).value_or(-1);
        }
      }
      binding_.strides[id] = std::move(strides);
    }
    return true;
  }

  std::size_t new_cell(std::int64_t v) {
    cells_.push_back(v);
    return cells_.size() - 1;
  }
  std::int64_t read(const Ref& r) { return cells_[cells_of_[r.id].at(r.output)]; }

  void run_node(std::size_t id) {
    const PNode& n = p_.nodes[id];
    if (n.input() || !cells_of_[id].empty()) {
      return;
    }
    for (const Ref& a : n.args) {
      run_node(a.id);
    }
    auto arg = [&](std::size_t i) { return read(n.args[i]); };
    auto fresh = [&](std::int64_t v) { cells_of_[id] = {new_cell(v)}; };
    auto write_first = [&](std::int64_t v) {
      const std::size_t cell = cells_of_[n.args[0].id].at(n.args[0].output);
      cells_[cell] = v;
      cells_of_[id] = {cell};
    };
    switch (n.info().sem) {
    case Sem::kAdd:
      return fresh(add(arg(0), arg(1)));
    case Sem::kSub:
      return fresh(add(arg(0), neg(arg(1))));
    case Sem::kMul:
      return fresh(mul(arg(0), arg(1)));
    case Sem::kMax:
      return fresh(std::max(arg(0), arg(1)));
    case Sem::kMin:
      return fresh(std::min(arg(0), arg(1)));
    case Sem::kNeg:
      return fresh(neg(arg(0)));
    case Sem::kAbs:
      return fresh(arg(0) < 0 ? neg(arg(0)) : arg(0));
    case Sem::kAddK:
      return fresh(add(arg(0), n.k));
    case Sem::kMulK:
      return fresh(mul(arg(0), n.k));
    case Sem::kSubK:
      return fresh(add(arg(0), neg(n.k)));
    case Sem::kFull:
      return fresh(n.k);
    case Sem::kMinMax:
      cells_of_[id] = {new_cell(std::min(arg(0), arg(1))), new_cell(std::max(arg(0), arg(1)))};
      return;
    case Sem::kView: // the same cell: a write through either is seen by both
      cells_of_[id] = {cells_of_[n.args[0].id].at(n.args[0].output)};
      return;
    case Sem::kAddInPlace:
      return write_first(add(arg(0), arg(1)));
    case Sem::kMulKInPlace:
      return write_first(mul(arg(0), n.k));
    case Sem::kCopyInPlace:
      return write_first(arg(1));
    case Sem::kRand:
      return fresh(static_cast<std::int64_t>(mix(probe_.seed + draws_++) % 1000));
    case Sem::kAccumulate:
      accumulator_ = add(accumulator_, arg(0));
      return fresh(accumulator_);
    }
  }

  const Program& p_;
  const Probe& probe_;
  Binding binding_;
  std::vector<std::int64_t> cells_;
  std::vector<std::vector<std::size_t>> cells_of_; // per node: its outputs' cells
  std::uint64_t draws_ = 0;
  std::int64_t accumulator_ = 0;
};

std::optional<Outcome> evaluate(const Program& p, const Probe& probe, bool guards_only = false) {
  return Machine(p, probe).run(guards_only);
}

void collect_literals(const GExpr& e, std::set<std::int64_t>& out) {
  if (e.kind == K::kInt) {
    out.insert(e.value);
  }
  for (const GExpr& kid : e.kids) {
    collect_literals(kid, out);
  }
}

// A probe that fits `p`'s input types, with sizes near the guards' literals.
Probe probe_for(Rng& rng, const Program& p, const std::vector<std::string>& symbols,
                const std::vector<std::int64_t>& interesting) {
  std::map<std::string, std::int64_t> values;
  for (const std::string& s : symbols) {
    // Zero often: it is where division raises and and/or order starts to matter.
    std::int64_t v = chance(rng, 25) ? 0 : static_cast<std::int64_t>(rng() % 9);
    if (!interesting.empty() && chance(rng, 60)) {
      v = std::max<std::int64_t>(0, pick_of(rng, interesting) +
                                        static_cast<std::int64_t>(rng() % 3) - 1);
    }
    values[s] = v;
  }
  Probe probe;
  for (const PNode& n : p.nodes) {
    if (!n.input()) {
      continue;
    }
    std::vector<std::int64_t> shape;
    for (const Dim& d : n.type.shape) {
      shape.push_back(d.is_symbol() ? values[std::get<std::string>(d.value)]
                                    : std::get<std::int64_t>(d.value));
    }
    probe.shapes.push_back(std::move(shape));
    probe.values.push_back(static_cast<std::int64_t>(rng() % 19) - 9);
  }
  probe.seed = rng();
  return probe;
}

// ---------------------------------------------------------------- rendering

// How one side spells its guards and graph: each pair is spelled twice, at
// random, so every comparison also checks spelling.
struct Style {
  Rng& rng;
  int spaces = 0;        // 0: none where allowed, 1: one, 2: random runs
  int words = 0;         // 0: and/or/not, 1: &&/||/!, 2: mixed
  bool literals = false; // integers in any base and float spellings
  int parens = 0;        // percent of subexpressions wrapped in redundant parentheses

  std::string ws() {
    static const std::vector<std::string> kRuns = {"", " ", "  ", "\t", " \n "};
    return spaces == 0 ? "" : spaces == 1 ? " " : pick_of(rng, kRuns);
  }
  std::string ws1() { // where a word needs a separator
    const std::string s = ws();
    return s.empty() ? " " : s;
  }
  bool c_ops() { return words == 1 || (words == 2 && chance(rng, 50)); }
};

std::string with_separators(Rng& rng, std::string digits) {
  for (std::size_t i = digits.size() - 1; i > 0; --i) {
    if (chance(rng, 30)) {
      digits.insert(i, "_");
    }
  }
  return digits;
}

std::string in_base(std::uint64_t v, unsigned base, bool upper) {
  if (v == 0) {
    return "0";
  }
  const std::string_view digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (; v > 0; v /= base) {
    out.insert(out.begin(), digits[v % base]);
  }
  return out;
}

std::string spell_int(Style& s, std::int64_t value) {
  const auto v = static_cast<std::uint64_t>(value);
  if (!s.literals) {
    return std::to_string(value);
  }
  switch (s.rng() % 9) {
  case 0:
    return "0x" + in_base(v, 16, false);
  case 1:
    return "0X" + in_base(v, 16, true);
  case 2:
    return (chance(s.rng, 50) ? "0o" : "0O") + in_base(v, 8, false);
  case 3:
    return (chance(s.rng, 50) ? "0b" : "0B") + in_base(v, 2, false);
  case 4:
    return with_separators(s.rng, std::to_string(value));
  case 5:
    return "0x_" + in_base(v, 16, false);
  case 6:
    return value == 0 ? (chance(s.rng, 50) ? "00" : "0_0") : std::to_string(value);
  default:
    return std::to_string(value);
  }
}

// mantissa * 10^exp10 in one of Python's float spellings.
std::string spell_float(Style& s, std::int64_t mantissa, int exp10) {
  const std::string digits = std::to_string(mantissa);
  const int choice = s.literals ? static_cast<int>(s.rng() % 6) : 0;
  if (choice == 1) {
    return digits + (chance(s.rng, 50) ? "e" : "E") + std::to_string(exp10);
  }
  if (choice == 2) {
    return digits + "0e" + std::to_string(exp10 - 1);
  }
  std::string text;
  const int point = static_cast<int>(digits.size()) + exp10; // digits before the point
  if (exp10 >= 0) {
    text = digits + std::string(static_cast<std::size_t>(exp10), '0') + ".";
    text += choice == 3 ? "" : "0";
  } else if (point > 0) {
    text = digits.substr(0, static_cast<std::size_t>(point)) + "." +
           digits.substr(static_cast<std::size_t>(point));
  } else {
    text = (choice == 4 ? "." : "0.") + std::string(static_cast<std::size_t>(-point), '0') + digits;
  }
  return choice == 5 ? text + "00" : text;
}

int precedence(const GExpr& e) {
  switch (e.kind) {
  case K::kBool:
    return e.text == "or" ? 1 : 2;
  case K::kUnary:
    return e.text == "not" ? 3 : 7;
  case K::kCmp:
    return 4;
  case K::kBin:
    return e.text == "+" || e.text == "-" ? 5 : e.text == "**" ? 8 : 6;
  default:
    return 9;
  }
}

std::string render(const GExpr& e, const Program& p, Style& s);

// A subexpression, parenthesized when precedence needs it (or at random).
std::string operand(const GExpr& e, const Program& p, Style& s, bool needs) {
  std::string inner = render(e, p, s);
  if (needs || chance(s.rng, s.parens)) {
    return "(" + s.ws() + inner + s.ws() + ")";
  }
  return inner;
}

std::string render(const GExpr& e, const Program& p, Style& s) {
  const int prec = precedence(e);
  switch (e.kind) {
  case K::kInt:
    return spell_int(s, e.value);
  case K::kFloat:
    return spell_float(s, e.value, e.exp10);
  case K::kConst:
  case K::kSym:
    return e.text;
  case K::kTensor: {
    const std::string dot = s.ws() + "." + s.ws();
    const std::string obj = p.nodes[e.input].name + dot;
    const std::string dim = s.ws() + spell_int(s, e.value) + s.ws();
    if (e.text == "numel") {
      return obj + "numel" + s.ws() + "(" + s.ws() + ")";
    }
    if (e.text == "size()[]") {
      return obj + "size" + s.ws() + "(" + s.ws() + ")" + s.ws() + "[" + dim + "]";
    }
    return obj + e.text + s.ws() + "(" + dim + ")";
  }
  case K::kUnary: {
    const GExpr& kid = e.kids[0];
    if (e.text != "not") {
      return e.text + s.ws() + operand(kid, p, s, precedence(kid) < 7);
    }
    if (s.c_ops()) { // C reads `!a < b` as `(!a) < b`: wrap all but atoms
      return "!" + s.ws() + operand(kid, p, s, precedence(kid) < 9);
    }
    return "not" + s.ws1() + operand(kid, p, s, precedence(kid) < 3);
  }
  case K::kBin:
    if (e.text == "**") { // right associative; `2 ** -1` needs no parentheses
      return operand(e.kids[0], p, s, precedence(e.kids[0]) <= 8) + s.ws() + "**" + s.ws() +
             operand(e.kids[1], p, s, precedence(e.kids[1]) < 7);
    }
    return operand(e.kids[0], p, s, precedence(e.kids[0]) < prec) + s.ws() + e.text + s.ws() +
           operand(e.kids[1], p, s, precedence(e.kids[1]) <= prec);
  case K::kBool: {
    std::string out;
    for (std::size_t i = 0; i < e.kids.size(); ++i) {
      if (i > 0) {
        const bool c = s.c_ops();
        out += c ? s.ws() + (e.text == "and" ? "&&" : "||") + s.ws() : s.ws1() + e.text + s.ws1();
      }
      out += operand(e.kids[i], p, s, precedence(e.kids[i]) <= prec);
    }
    return out;
  }
  case K::kCmp: {
    std::string out = operand(e.kids[0], p, s, precedence(e.kids[0]) <= prec);
    for (std::size_t i = 0; i < e.ops.size(); ++i) {
      out += s.ws() + e.ops[i] + s.ws() +
             operand(e.kids[i + 1], p, s, precedence(e.kids[i + 1]) <= prec);
    }
    return out;
  }
  case K::kCall:
    return e.text + s.ws() + "(" + s.ws() + operand(e.kids[0], p, s, false) + s.ws() + "," +
           s.ws() + operand(e.kids[1], p, s, false) + s.ws() + ")";
  }
  return {};
}

std::string dims_json(const std::vector<Dim>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    out += i > 0 ? ", " : "";
    out += dims[i].is_symbol() ? "\"" + std::get<std::string>(dims[i].value) + "\""
                               : std::to_string(std::get<std::int64_t>(dims[i].value));
  }
  return out + "]";
}

// A JSON object from members in random order.
std::string object(Rng& rng, std::vector<std::string> members, const std::string& sep) {
  std::shuffle(members.begin(), members.end(), rng);
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) {
    out += (i > 0 ? "," + sep : "") + members[i];
  }
  return out + "}";
}

std::string type_json(Rng& rng, const TensorType& t) {
  std::vector<std::string> members = {R"("dtype": ")" + t.dtype + "\"",
                                      R"("shape": )" + dims_json(t.shape)};
  if (!t.strides.empty()) {
    members.push_back(R"("strides": )" + dims_json(t.strides));
  }
  return object(rng, std::move(members), " ");
}

std::string ref_json(Rng& rng, const Program& p, const Ref& r) {
  const std::string& name = p.nodes[r.id].name;
  return "\"" + name + (r.output > 0 || chance(rng, 10) ? ":" + std::to_string(r.output) : "") +
         "\"";
}

std::string graph_json(Rng& rng, const Program& p) {
  const std::string nl = chance(rng, 50) ? "\n  " : " ";
  std::vector<std::string> inputs, nodes, outputs;
  for (const PNode& n : p.nodes) {
    if (n.input()) {
      inputs.push_back(object(
          rng, {R"("name": ")" + n.name + "\"", R"("type": )" + type_json(rng, n.type)}, " "));
      continue;
    }
    std::vector<std::string> members = {R"("name": ")" + n.name + "\"",
                                        R"("op": ")" + std::string(n.info().op) + "\""};
    std::string args;
    for (const Ref& a : n.args) {
      args += (args.empty() ? "" : ", ") + ref_json(rng, p, a);
    }
    if (!args.empty() || chance(rng, 50)) {
      members.push_back(R"("inputs": [)" + args + "]");
    }
    if (!n.info().attr.empty()) {
      members.push_back(R"("attrs": {")" + std::string(n.info().attr) +
                        "\": " + std::to_string(n.k) + "}");
    } else if (chance(rng, 20)) {
      members.emplace_back(R"("attrs": {})");
    }
    if (n.info().flagged) {
      members.emplace_back(R"("effectful": true)");
    } else if (chance(rng, 10)) {
      members.emplace_back(R"("effectful": false)");
    }
    std::string types;
    for (std::uint32_t i = 0; i < n.info().outputs; ++i) {
      types += (i > 0 ? ", " : "") + type_json(rng, n.type);
    }
    members.push_back(R"("outputs": [)" + types + "]");
    nodes.push_back(object(rng, std::move(members), " "));
  }
  for (const Ref& r : p.outputs) {
    outputs.push_back(ref_json(rng, p, r));
  }
  auto list = [&](const std::vector<std::string>& items) {
    std::string out = "[";
    for (std::size_t i = 0; i < items.size(); ++i) {
      out += (i > 0 ? "," : "") + nl + "  " + items[i];
    }
    return out + "]";
  };
  std::vector<std::string> members = {R"("inputs": )" + list(inputs), R"("nodes": )" + list(nodes),
                                      R"("outputs": )" + list(outputs)};
  if (chance(rng, 30)) {
    members.emplace_back(R"("format": "kcache-graph/1")");
  }
  return object(rng, std::move(members), nl);
}

bool topological(const Program& p) {
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    for (const Ref& a : p.nodes[id].args) {
      if (a.id >= id) {
        return false;
      }
    }
  }
  return true;
}

// The same graph through the builder API (only for listings in dependency order).
Graph graph_api(const Program& p) {
  Graph g;
  for (const PNode& n : p.nodes) {
    if (n.input()) {
      g.add_input(n.name, n.type);
      continue;
    }
    std::vector<ValueRef> args;
    for (const Ref& a : n.args) {
      args.push_back(ValueRef{static_cast<NodeId>(a.id), a.output});
    }
    Attrs attrs;
    if (!n.info().attr.empty()) {
      attrs.emplace(std::string(n.info().attr), n.k);
    }
    const NodeId id =
        *g.add_node(n.name, std::string(n.info().op), std::move(args),
                    std::vector<TensorType>(n.info().outputs, n.type), std::move(attrs));
    if (n.info().flagged) {
      (void)g.mark_effectful(id);
    }
  }
  for (const Ref& r : p.outputs) {
    (void)g.add_output(ValueRef{static_cast<NodeId>(r.id), r.output});
  }
  return g;
}

struct Built {
  std::string shown; // the graph and guards as submitted, for failure messages
  tl::expected<KeyManifest, std::string> manifest = tl::unexpected(std::string("not built"));
};

Built build(Rng& rng, const Program& p) {
  Built out;
  Style style{rng, static_cast<int>(rng() % 3), static_cast<int>(rng() % 3), chance(rng, 60),
              chance(rng, 50) ? 0 : 15};
  std::vector<std::string> guards;
  for (const GExpr& g : p.guards) {
    guards.push_back(style.ws() + operand(g, p, style, false) + style.ws());
  }
  std::optional<Graph> graph;
  if (topological(p) && chance(rng, 25)) {
    graph = graph_api(p);
    out.shown = "(builder) " + graph_to_json(*graph);
  } else {
    out.shown = graph_json(rng, p);
    auto parsed = parse_graph_json(out.shown);
    if (!parsed) {
      out.manifest = tl::unexpected("graph refused: " + parsed.error().message);
      return out;
    }
    graph = std::move(*parsed);
  }
  out.shown += "\nguards:";
  for (const std::string& g : guards) {
    out.shown += "\n  [" + g + "]";
  }
  auto m = KeyBuilder().ns("fuzz").graph(*graph).guards(guards).hardware("cpu:x86-64-v3").build();
  if (m) {
    out.manifest = std::move(*m);
  } else {
    out.manifest = tl::unexpected("manifest refused: " + m.error().message);
  }
  return out;
}

// ---------------------------------------------------------------- transformations

// Guard subexpressions can be dropped where the key sorts and/or operands
// only if they cannot raise; these subsets of guards.h's "quiet" and
// "numeric" are what the tests below claim, the evaluator checks the rest.
bool quiet_number(const GExpr& e) {
  switch (e.kind) {
  case K::kInt:
  case K::kSym:
    return true;
  case K::kUnary:
    return e.text == "-" && quiet_number(e.kids[0]);
  case K::kBin:
    return (e.text == "+" || e.text == "-" || e.text == "*") && quiet_number(e.kids[0]) &&
           quiet_number(e.kids[1]);
  default:
    return false;
  }
}
bool quiet_truth(const GExpr& e) {
  const auto all = [&](auto pred) { return std::all_of(e.kids.begin(), e.kids.end(), pred); };
  switch (e.kind) {
  case K::kCmp:
    return all(quiet_number);
  case K::kBool:
    return all(quiet_truth);
  case K::kUnary:
    return e.text == "not" ? quiet_truth(e.kids[0]) : quiet_number(e);
  default:
    return quiet_number(e);
  }
}
bool numeric(const GExpr& e) {
  switch (e.kind) {
  case K::kInt:
  case K::kFloat:
  case K::kSym:
  case K::kTensor:
    return true;
  case K::kUnary:
    return e.text != "not" && numeric(e.kids[0]);
  case K::kBin:
  case K::kCall:
    return std::all_of(e.kids.begin(), e.kids.end(), numeric);
  default:
    return false;
  }
}

struct Site {
  GExpr* e;
  bool truth; // only the truth of this subexpression is used
};

void collect(GExpr& e, bool truth, std::vector<Site>& out) {
  out.push_back({&e, truth});
  const bool kid_truth = (e.kind == K::kUnary && e.text == "not") || (e.kind == K::kBool && truth);
  for (GExpr& kid : e.kids) {
    collect(kid, kid_truth, out);
  }
}

// The guard subexpressions of `p` that satisfy `pred`.
std::vector<Site> sites(Program& p, const std::function<bool(const Site&)>& pred) {
  std::vector<Site> all, out;
  for (GExpr& g : p.guards) {
    collect(g, true, all);
  }
  std::copy_if(all.begin(), all.end(), std::back_inserter(out), pred);
  return out;
}

// The program with its nodes listed as `order` (old ids) says.
Program permuted(const Program& p, const std::vector<std::size_t>& order) {
  std::vector<std::size_t> new_id(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    new_id[order[i]] = i;
  }
  Program q = p;
  for (std::size_t i = 0; i < order.size(); ++i) {
    q.nodes[i] = p.nodes[order[i]];
    for (Ref& a : q.nodes[i].args) {
      a.id = new_id[a.id];
    }
  }
  for (Ref& r : q.outputs) {
    r.id = new_id[r.id];
  }
  std::function<void(GExpr&)> remap = [&](GExpr& e) {
    if (e.kind == K::kTensor) {
      e.input = new_id[e.input];
    }
    std::for_each(e.kids.begin(), e.kids.end(), remap);
  };
  std::for_each(q.guards.begin(), q.guards.end(), remap);
  return q;
}

// What GRAPH_FORMAT.md allows and the evaluator models: a node may name one
// listed after it only when no effect lies between (the named one included);
// every symbol is bound by an input's shape.
bool well_formed(const Program& p) {
  std::set<std::string> bound;
  std::size_t inputs = 0;
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    const PNode& n = p.nodes[id];
    if (n.input()) {
      if (id != inputs++) {
        return false; // inputs first
      }
      for (const Dim& d : n.type.shape) {
        if (d.is_symbol()) {
          bound.insert(std::get<std::string>(d.value));
        }
      }
      continue;
    }
    for (const Ref& a : n.args) {
      if (a.id == id) {
        return false;
      }
      for (std::size_t between = id + 1; a.id > id && between <= a.id; ++between) {
        if (p.nodes[between].effect()) {
          return false;
        }
      }
    }
  }
  const auto symbols = symbols_of(p);
  if (!std::all_of(symbols.begin(), symbols.end(),
                   [&](const std::string& s) { return bound.count(s) > 0; })) {
    return false;
  }
  // No cycles through forward references.
  std::vector<int> state(p.nodes.size(), 0);
  std::function<bool(std::size_t)> acyclic = [&](std::size_t id) {
    if (state[id] == 2) {
      return true;
    }
    if (state[id] == 1) {
      return false;
    }
    state[id] = 1;
    for (const Ref& a : p.nodes[id].args) {
      if (!acyclic(a.id)) {
        return false;
      }
    }
    state[id] = 2;
    return true;
  };
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    if (!acyclic(id)) {
      return false;
    }
  }
  std::vector<Site> guard_sites;
  Program copy = p;
  guard_sites = sites(copy, [](const Site&) { return true; });
  return std::all_of(guard_sites.begin(), guard_sites.end(), [&](const Site& s) {
    return (s.e->kind != K::kSym || bound.count(s.e->text) > 0) &&
           (s.e->kind != K::kTensor || p.nodes[s.e->input].input());
  });
}

struct Variant {
  Program p;
  bool must_match; // the key documents this change as normalized
};
using Maybe = std::optional<Variant>;

struct Transform {
  const char* name;
  std::function<Maybe(Rng&, const Program&)> apply;
};

// Applies `edit` to one random guard site satisfying `pred`.
Maybe edit_site(Rng& rng, const Program& p, const std::function<bool(const Site&)>& pred,
                const std::function<bool(Rng&, GExpr&)>& edit, bool must_match) {
  Program q = p;
  auto found = sites(q, pred);
  if (found.empty() || !edit(rng, *pick_of(rng, found).e)) {
    return std::nullopt;
  }
  return Variant{std::move(q), must_match};
}

std::vector<std::size_t> identity_order(const Program& p) {
  std::vector<std::size_t> order(p.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::string flipped(const std::string& op) {
  return op == "<" ? ">" : op == ">" ? "<" : op == "<=" ? ">=" : op == ">=" ? "<=" : op;
}
bool ordering(const std::string& op) {
  return op == "<" || op == "<=" || op == ">" || op == ">=";
}

// ---- meaning kept: the key must stay (the evaluator checks the claim too)

Maybe respell(Rng&, const Program& p) {
  return Variant{p, true};
}

Maybe rename_nodes(Rng& rng, const Program& p) {
  Program q = p;
  auto names = node_names();
  std::shuffle(names.begin(), names.end(), rng);
  std::size_t i = 0;
  for (PNode& n : q.nodes) {
    if (!n.input()) {
      n.name = names[i++];
    }
  }
  return Variant{std::move(q), true};
}

Maybe rename_inputs(Rng& rng, const Program& p) {
  Program q = p;
  auto names = kInputNames;
  std::shuffle(names.begin(), names.end(), rng);
  std::size_t i = 0;
  for (PNode& n : q.nodes) {
    if (n.input()) {
      n.name = names[i++];
    }
  }
  return Variant{std::move(q), true};
}

Maybe rename_symbols(Rng& rng, const Program& p) {
  const auto old = symbols_of(p);
  auto fresh = kSymbolNames;
  std::shuffle(fresh.begin(), fresh.end(), rng);
  std::map<std::string, std::string> to;
  for (std::size_t i = 0; i < old.size(); ++i) {
    to[old[i]] = fresh[i];
  }
  Program q = p;
  for (PNode& n : q.nodes) {
    for (auto* dims : {&n.type.shape, &n.type.strides}) {
      for (Dim& d : *dims) {
        if (d.is_symbol()) {
          d = Dim::symbol(to.at(std::get<std::string>(d.value)));
        }
      }
    }
  }
  for (const Site& s : sites(q, [](const Site& s) { return s.e->kind == K::kSym; })) {
    s.e->text = to.at(s.e->text);
  }
  return Variant{std::move(q), true};
}

// Pure nodes between the same effects, listed in another order.
Maybe reorder_pure(Rng& rng, const Program& p) {
  auto order = identity_order(p);
  bool moved = false;
  for (std::size_t start = input_count(p); start < order.size();) {
    std::size_t end = start;
    while (end < order.size() && !p.nodes[end].effect()) {
      ++end;
    }
    moved = moved || end - start > 1;
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(start),
                 order.begin() + static_cast<std::ptrdiff_t>(end), rng);
    start = end + 1;
  }
  if (!moved) {
    return std::nullopt;
  }
  return Variant{permuted(p, order), true};
}

// and/or operands reordered or regrouped where only truth counts and none can raise.
Maybe commute_truth(Rng& rng, const Program& p) {
  return edit_site(
      rng, p, [](const Site& s) { return s.truth && s.e->kind == K::kBool && quiet_truth(*s.e); },
      [](Rng& r, GExpr& e) {
        std::shuffle(e.kids.begin(), e.kids.end(), r);
        if (e.kids.size() > 2 && chance(r, 50)) {
          GExpr rest = node_of(K::kBool, e.text, {});
          rest.kids.assign(e.kids.begin() + 1, e.kids.end());
          e.kids.resize(1);
          e.kids.push_back(std::move(rest));
        }
        return true;
      },
      true);
}

// `a < b` as `b > a`, `a == b` as `b == a`; a chain read the other way
// (normalized only when nothing in it can raise).
Maybe flip_compare(Rng& rng, const Program& p) {
  Program q = p;
  auto found = sites(q, [](const Site& s) { return s.e->kind == K::kCmp; });
  if (found.empty()) {
    return std::nullopt;
  }
  GExpr& e = *pick_of(rng, found).e;
  const bool single = e.ops.size() == 1;
  if (!single && !(std::all_of(e.ops.begin(), e.ops.end(), ordering) &&
                   (std::all_of(e.ops.begin(), e.ops.end(),
                                [](const std::string& op) { return op[0] == '<'; }) ||
                    std::all_of(e.ops.begin(), e.ops.end(),
                                [](const std::string& op) { return op[0] == '>'; })))) {
    return std::nullopt;
  }
  std::reverse(e.kids.begin(), e.kids.end());
  std::reverse(e.ops.begin(), e.ops.end());
  std::transform(e.ops.begin(), e.ops.end(), e.ops.begin(), flipped);
  const bool must = single || std::all_of(e.kids.begin(), e.kids.end(), quiet_number);
  return Variant{std::move(q), must};
}

// The operands of + or * swapped where both are numbers.
Maybe commute_numeric(Rng& rng, const Program& p) {
  return edit_site(
      rng, p,
      [](const Site& s) {
        return s.e->kind == K::kBin && (s.e->text == "+" || s.e->text == "*") &&
               numeric(s.e->kids[0]) && numeric(s.e->kids[1]);
      },
      [](Rng&, GExpr& e) {
        std::swap(e.kids[0], e.kids[1]);
        return true;
      },
      true);
}

// A guard set is a conjunction: split `a and b`, merge two guards, repeat
// one, reorder them.
Maybe guard_set(Rng& rng, const Program& p) {
  if (p.guards.empty()) {
    return std::nullopt;
  }
  Program q = p;
  auto& g = q.guards;
  const std::size_t i = pick(rng, g.size());
  switch (rng() % 4) {
  case 0:
    if (g[i].kind != K::kBool || g[i].text != "and") {
      return std::nullopt;
    }
    for (GExpr& kid : std::vector<GExpr>(g[i].kids)) {
      g.push_back(std::move(kid));
    }
    g.erase(g.begin() + static_cast<std::ptrdiff_t>(i));
    break;
  case 1: {
    if (g.size() < 2) {
      return std::nullopt;
    }
    const std::size_t j = (i + 1 + pick(rng, g.size() - 1)) % g.size();
    GExpr both = node_of(K::kBool, "and", {g[i], g[j]});
    g.erase(g.begin() + static_cast<std::ptrdiff_t>(std::max(i, j)));
    g.erase(g.begin() + static_cast<std::ptrdiff_t>(std::min(i, j)));
    g.push_back(std::move(both));
    break;
  }
  case 2:
    g.push_back(g[i]);
    break;
  default:
    break;
  }
  std::shuffle(g.begin(), g.end(), rng);
  return Variant{std::move(q), true};
}

std::vector<Dim> row_major(const TensorType& t) {
  if (t.shape.size() == 1) {
    return {Dim::fixed(1)};
  }
  return {t.shape[1], Dim::fixed(1)};
}

// Explicit row-major strides added to, or dropped from, an input.
Maybe row_major_strides(Rng& rng, const Program& p) {
  Program q = p;
  PNode& in = q.nodes[pick(rng, input_count(q))];
  if (in.type.strides.empty()) {
    in.type.strides = row_major(in.type);
  } else if (in.type.strides == row_major(in.type)) {
    in.type.strides.clear();
  } else {
    return std::nullopt;
  }
  return Variant{std::move(q), true};
}

// An edge moved from a node to its look-alike: the same value in a pure
// graph; with effects, one of the two may be written in place.
Maybe twin_redirect(Rng& rng, const Program& p) {
  Program q = p;
  // Nodes an effect may write: read by one, or through pure nodes (views).
  std::set<std::size_t> read_by_effects;
  for (std::size_t id = q.nodes.size(); id-- > 0;) {
    const PNode& n = q.nodes[id];
    for (const Ref& a : n.args) {
      if (n.effect() || read_by_effects.count(id) > 0) {
        read_by_effects.insert(a.id);
      }
    }
  }
  // Edges (and their new targets) between look-alikes; first those where
  // one of the two may be written in place.
  std::vector<std::pair<Ref*, std::size_t>> edges, written;
  auto offer = [&](Ref& r) {
    const PNode& from = q.nodes[r.id];
    if (from.input() || from.effect()) {
      return;
    }
    for (std::size_t id = input_count(q); id < q.nodes.size(); ++id) {
      if (id != r.id && same_content(q.nodes[id], from)) {
        (read_by_effects.count(id) + read_by_effects.count(r.id) > 0 ? written : edges)
            .emplace_back(&r, id);
      }
    }
  };
  for (PNode& n : q.nodes) {
    std::for_each(n.args.begin(), n.args.end(), offer);
  }
  std::for_each(q.outputs.begin(), q.outputs.end(), offer);
  const auto& from = !written.empty() && (edges.empty() || chance(rng, 80)) ? written : edges;
  if (from.empty()) {
    return std::nullopt;
  }
  const auto& [edge, target] = pick_of(rng, from);
  edge->id = target;
  return Variant{std::move(q), !has_effects(p)};
}

// ---- meaning may change: the key must change whenever the evaluation does

Maybe swap_args(Rng& rng, const Program& p) {
  std::vector<std::size_t> ids;
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    if (p.nodes[id].args.size() == 2 && !(p.nodes[id].args[0] == p.nodes[id].args[1])) {
      ids.push_back(id);
    }
  }
  if (ids.empty()) {
    return std::nullopt;
  }
  Program q = p;
  auto& args = q.nodes[pick_of(rng, ids)].args;
  std::swap(args[0], args[1]);
  return Variant{std::move(q), false};
}

Maybe change_constant(Rng& rng, const Program& p) {
  std::vector<std::size_t> ids;
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    if (!p.nodes[id].input() && !p.nodes[id].info().attr.empty()) {
      ids.push_back(id);
    }
  }
  if (ids.empty()) {
    return std::nullopt;
  }
  Program q = p;
  q.nodes[pick_of(rng, ids)].k += static_cast<std::int64_t>(1 + rng() % 3);
  return Variant{std::move(q), false};
}

Maybe change_op(Rng& rng, const Program& p) {
  Program q = p;
  PNode& n = q.nodes[pick(rng, q.nodes.size())];
  if (n.input()) {
    return std::nullopt;
  }
  std::vector<int> alike;
  for (std::size_t op = 0; op < kOps.size(); ++op) {
    const OpInfo& o = kOps[op];
    if (static_cast<int>(op) != n.op && o.arity == n.info().arity && o.effect == n.info().effect &&
        o.outputs == n.info().outputs) {
      alike.push_back(static_cast<int>(op));
    }
  }
  if (alike.empty()) {
    return std::nullopt;
  }
  n.op = pick_of(rng, alike);
  return Variant{std::move(q), false};
}

// Moves the node at `from` to `to` in the listing.
Maybe moved(const Program& p, std::size_t from, std::size_t to) {
  auto order = identity_order(p);
  const std::size_t id = order[from];
  order.erase(order.begin() + static_cast<std::ptrdiff_t>(from));
  order.insert(order.begin() + static_cast<std::ptrdiff_t>(to), id);
  Program q = permuted(p, order);
  return Variant{std::move(q), false};
}

Maybe swap_effects(Rng& rng, const Program& p) {
  std::vector<std::size_t> effects;
  for (std::size_t id = 0; id < p.nodes.size(); ++id) {
    if (p.nodes[id].effect()) {
      effects.push_back(id);
    }
  }
  std::shuffle(effects.begin(), effects.end(), rng);
  for (std::size_t i = 0; i + 1 < effects.size(); ++i) {
    const std::size_t a = std::min(effects[i], effects[i + 1]);
    const std::size_t b = std::max(effects[i], effects[i + 1]);
    auto order = identity_order(p);
    if (chance(rng, 50)) {
      std::swap(order[a], order[b]);
    } else { // b moves up to just before a
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(b));
      order.insert(order.begin() + static_cast<std::ptrdiff_t>(a), b);
    }
    Program q = permuted(p, order);
    if (well_formed(q)) {
      return Variant{std::move(q), false};
    }
  }
  return std::nullopt;
}

// A pure node listed elsewhere, possibly across an effect.
Maybe move_node(Rng& rng, const Program& p) {
  const std::size_t first = input_count(p);
  if (p.nodes.size() - first < 2) {
    return std::nullopt;
  }
  const std::size_t from = first + pick(rng, p.nodes.size() - first);
  const std::size_t to = first + pick(rng, p.nodes.size() - first);
  if (from == to || p.nodes[from].effect()) {
    return std::nullopt;
  }
  return moved(p, from, to);
}

Maybe redirect_edge(Rng& rng, const Program& p) {
  Program q = p;
  if (chance(rng, 30)) {
    q.outputs[pick(rng, q.outputs.size())] = any_value(rng, q);
    return Variant{std::move(q), false};
  }
  PNode& n = q.nodes[pick(rng, q.nodes.size())];
  if (n.args.empty()) {
    return std::nullopt;
  }
  n.args[pick(rng, n.args.size())] = any_value(rng, q);
  return Variant{std::move(q), false};
}

Maybe guard_literal(Rng& rng, const Program& p) {
  return edit_site(
      rng, p, [](const Site& s) { return s.e->kind == K::kInt || s.e->kind == K::kFloat; },
      [](Rng& r, GExpr& e) {
        e.value = chance(r, 50) ? e.value + 1 : e.value > 1 ? e.value / 2 : e.value * 2 + 2;
        return true;
      },
      false);
}

Maybe guard_compare_op(Rng& rng, const Program& p) {
  return edit_site(
      rng, p, [](const Site& s) { return s.e->kind == K::kCmp; },
      [](Rng& r, GExpr& e) {
        static const std::vector<std::string> kCmp = {"<", "<=", ">", ">=", "==", "!="};
        std::string& op = e.ops[pick(r, e.ops.size())];
        const std::string old = op;
        while (op == old) {
          op = pick_of(r, kCmp);
        }
        return true;
      },
      false);
}

Maybe guard_drop(Rng& rng, const Program& p) {
  if (p.guards.empty()) {
    return std::nullopt;
  }
  Program q = p;
  q.guards.erase(q.guards.begin() + static_cast<std::ptrdiff_t>(pick(rng, q.guards.size())));
  return Variant{std::move(q), false};
}

// A parenthesis moved across operators: (a - b) - c to a - (b - c),
// (a or b) and c to a or (b and c), not (a and b) to (not a) and b.
Maybe guard_reassociate(Rng& rng, const Program& p) {
  return edit_site(
      rng, p,
      [](const Site& s) {
        const GExpr& e = *s.e;
        return (e.kind == K::kBin && e.kids[0].kind == K::kBin) ||
               (e.kind == K::kBool && e.kids[0].kind == K::kBool) ||
               (e.kind == K::kUnary && !e.kids[0].kids.empty() && e.kids[0].kind != K::kCall &&
                e.kids[0].kind != K::kCmp);
      },
      [](Rng&, GExpr& e) {
        if (e.kind == K::kUnary) { // op (a # b) -> (op a) # b
          GExpr inner = std::move(e.kids[0]);
          GExpr first = node_of(K::kUnary, e.text, {std::move(inner.kids[0])});
          inner.kids[0] = std::move(first);
          e = std::move(inner);
          return true;
        }
        // (a # b ...) @ c ... -> a # (b ... @ c ...)
        GExpr inner = std::move(e.kids[0]);
        GExpr outer = std::move(e);
        GExpr rest = node_of(outer.kind, outer.text, {});
        if (inner.kind == K::kBin) {
          rest.kids = {std::move(inner.kids[1]), std::move(outer.kids[1])};
          inner.kids[1] = std::move(rest);
        } else {
          rest.kids.push_back(std::move(inner.kids.back()));
          rest.kids.insert(rest.kids.end(), std::make_move_iterator(outer.kids.begin() + 1),
                           std::make_move_iterator(outer.kids.end()));
          inner.kids.back() = std::move(rest);
        }
        e = std::move(inner);
        return true;
      },
      false);
}

// Sides swapped where order matters (or may): a - b, a // b, a ** b, a < b.
Maybe guard_swap_sides(Rng& rng, const Program& p) {
  return edit_site(
      rng, p,
      [](const Site& s) {
        return (s.e->kind == K::kBin || s.e->kind == K::kCall || s.e->kind == K::kCmp) &&
               !(s.e->kids.front() == s.e->kids.back());
      },
      [](Rng&, GExpr& e) {
        std::swap(e.kids.front(), e.kids.back());
        return true;
      },
      false);
}

// and/or operands reordered anywhere: where one may raise, or the value is used.
Maybe commute_any(Rng& rng, const Program& p) {
  return edit_site(
      rng, p,
      [](const Site& s) { return s.e->kind == K::kBool && (!s.truth || !quiet_truth(*s.e)); },
      [](Rng& r, GExpr& e) {
        std::shuffle(e.kids.begin(), e.kids.end(), r);
        return true;
      },
      false);
}

// Another symbol, another input, another dim or method.
Maybe guard_name(Rng& rng, const Program& p) {
  const auto symbols = symbols_of(p);
  const std::size_t inputs = input_count(p);
  return edit_site(
      rng, p, [](const Site& s) { return s.e->kind == K::kSym || s.e->kind == K::kTensor; },
      [&](Rng& r, GExpr& e) {
        if (e.kind == K::kSym) {
          if (symbols.size() < 2) {
            return false;
          }
          const std::string old = e.text;
          while (e.text == old) {
            e.text = pick_of(r, symbols);
          }
          return true;
        }
        switch (r() % 3) {
        case 0:
          e.input = pick(r, inputs);
          break;
        case 1:
          e.value = 1 - std::min<std::int64_t>(e.value, 1);
          break;
        default:
          e.text = e.text == "stride" ? "size" : "stride";
          break;
        }
        return true;
      },
      false);
}

// An input's type changed: a dim, a shared symbol, or strides that are not row-major.
Maybe change_input(Rng& rng, const Program& p) {
  Program q = p;
  PNode& in = q.nodes[pick(rng, input_count(q))];
  Dim& d = in.type.shape[pick(rng, in.type.shape.size())];
  const auto symbols = symbols_of(q);
  switch (rng() % 3) {
  case 0:
    d = d.is_symbol() ? Dim::fixed(static_cast<std::int64_t>(1 + rng() % 4))
                      : Dim::fixed(std::get<std::int64_t>(d.value) + 1);
    break;
  case 1:
    d = Dim::symbol(pick_of(rng, kSymbolNames));
    break;
  default:
    if (in.type.shape.size() == 2) {
      in.type.strides = {Dim::fixed(1), in.type.shape[0]};
    } else {
      in.type.strides = {Dim::fixed(2)};
    }
  }
  return Variant{std::move(q), false};
}

Maybe swap_inputs(Rng& rng, const Program& p) {
  const std::size_t inputs = input_count(p);
  if (inputs < 2) {
    return std::nullopt;
  }
  auto order = identity_order(p);
  std::shuffle(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(inputs), rng);
  return Variant{permuted(p, order), false};
}

Maybe change_outputs(Rng& rng, const Program& p) {
  Program q = p;
  switch (rng() % 3) {
  case 0:
    std::shuffle(q.outputs.begin(), q.outputs.end(), rng);
    break;
  case 1:
    if (q.outputs.size() < 2) {
      return std::nullopt;
    }
    q.outputs.erase(q.outputs.begin() + static_cast<std::ptrdiff_t>(pick(rng, q.outputs.size())));
    break;
  default:
    q.outputs.push_back(any_value(rng, q));
  }
  return Variant{std::move(q), false};
}

Maybe add_dead_node(Rng& rng, const Program& p) {
  Program q = p;
  PNode n;
  n.name = "dead";
  n.op = op_index(Sem::kNeg);
  n.args = {any_value(rng, q)};
  n.type = type_of(q, n.args[0]);
  q.nodes.push_back(std::move(n));
  return Variant{std::move(q), false};
}

Maybe independent(Rng& rng, const Program&) {
  return Variant{generate(rng), false};
}

const std::vector<Transform>& transforms() {
  static const std::vector<Transform> all = {
      {"respell", respell},
      {"rename_nodes", rename_nodes},
      {"rename_inputs", rename_inputs},
      {"rename_symbols", rename_symbols},
      {"reorder_pure_between_effects", reorder_pure},
      {"commute_quiet_and_or", commute_truth},
      {"flip_comparison", flip_compare},
      {"commute_numeric_plus_times", commute_numeric},
      {"split_merge_repeat_guards", guard_set},
      {"row_major_strides", row_major_strides},
      {"redirect_to_look_alike", twin_redirect},
      {"swap_arguments", swap_args},
      {"change_attribute", change_constant},
      {"change_op", change_op},
      {"swap_effects", swap_effects},
      {"move_node", move_node},
      {"redirect_edge", redirect_edge},
      {"guard_literal", guard_literal},
      {"guard_comparison_op", guard_compare_op},
      {"guard_removed", guard_drop},
      {"guard_reassociate", guard_reassociate},
      {"guard_swap_sides", guard_swap_sides},
      {"commute_any_and_or", commute_any},
      {"guard_other_name", guard_name},
      {"change_input_type", change_input},
      {"swap_input_positions", swap_inputs},
      {"change_outputs", change_outputs},
      {"add_dead_node", add_dead_node},
      {"independent_program", independent},
  };
  return all;
}

// ---------------------------------------------------------------- the check

struct Tally {
  std::size_t applied = 0, same_key = 0, meaning_changed = 0;
};

std::vector<std::int64_t> interesting_sizes(const Program& a, const Program& b) {
  std::set<std::int64_t> literals;
  for (const Program* p : {&a, &b}) {
    for (const GExpr& g : p->guards) {
      collect_literals(g, literals);
    }
  }
  return {literals.begin(), literals.end()};
}

std::string show(const Probe& probe) {
  std::ostringstream out;
  for (std::size_t i = 0; i < probe.shapes.size(); ++i) {
    out << (i > 0 ? ", " : "") << "input " << i << ": value " << probe.values[i] << " shape [";
    for (std::size_t d = 0; d < probe.shapes[i].size(); ++d) {
      out << (d > 0 ? "," : "") << probe.shapes[i][d];
    }
    out << "]";
  }
  return out.str() + ", seed " + std::to_string(probe.seed);
}

std::string show(const std::optional<Outcome>& o) {
  if (!o) {
    return "(not modelled)";
  }
  if (!o->accepted) {
    return "inputs do not fit the types";
  }
  std::ostringstream out;
  out << "guards " << (o->guards_hold ? "hold" : "fail") << "; outputs";
  for (std::int64_t v : o->outputs) {
    out << " " << v;
  }
  out << "; inputs after";
  for (std::int64_t v : o->final_inputs) {
    out << " " << v;
  }
  out << "; layout";
  for (const auto& l : o->layout) {
    out << " (";
    for (std::int64_t v : l) {
      out << v << " ";
    }
    out << ")";
  }
  return out.str();
}

// Evaluates both programs on `probes` probes; returns the first probe on
// which they differ, with both outcomes, or "".
std::string first_difference(Rng& rng, const Program& a, const Program& b, int probes) {
  const auto sizes = interesting_sizes(a, b);
  const std::array<std::vector<std::string>, 2> symbols = {symbols_of(a), symbols_of(b)};
  for (int i = 0; i < probes; ++i) {
    const Program& side = i % 2 == 0 ? a : b;
    Probe probe = probe_for(rng, side, symbols[i % 2], sizes);
    // Half the probes look for sizes where the guards hold: a change masked
    // by another guard failing shows nothing.
    for (int tries = 0; i % 4 < 2 && tries < 8; ++tries) {
      const auto o = evaluate(side, probe, /*guards_only=*/true);
      if (!o || o->guards_hold) {
        break;
      }
      probe = probe_for(rng, side, symbols[i % 2], sizes);
    }
    const auto oa = evaluate(a, probe);
    const auto ob = evaluate(b, probe);
    if (oa && ob && !(*oa == *ob)) {
      return "on " + show(probe) + "\n  A: " + show(oa) + "\n  B: " + show(ob);
    }
  }
  return {};
}

class Fuzzer {
public:
  explicit Fuzzer(std::uint64_t seed) : seed_(seed), rng_(seed) {}

  // One round: a program and three variants of it, each keyed and evaluated
  // against it. Each transformation in turn leads a round, on a program it
  // applies to, so a short run tries them all; two more (any that apply)
  // follow. Returns a failure message, or "".
  std::string round(std::uint64_t index) {
    const Transform& lead = transforms()[index % transforms().size()];
    Program a;
    std::vector<std::pair<const Transform*, Variant>> variants;
    for (int tries = 0; tries < 16 && variants.empty(); ++tries) {
      a = generate(rng_);
      if (Maybe v = lead.apply(rng_, a); v && well_formed(v->p)) {
        variants.emplace_back(&lead, std::move(*v));
      }
    }
    for (int tries = 0; tries < 6 && variants.size() < 3; ++tries) {
      const Transform& t = pick_of(rng_, transforms());
      if (Maybe v = t.apply(rng_, a); v && well_formed(v->p)) {
        variants.emplace_back(&t, std::move(*v));
      }
    }
    const Built ba = build(rng_, a);
    const std::string where = "seed " + std::to_string(seed_) + ", round " + std::to_string(index);
    if (!ba.manifest) {
      return where + ": refused: " + ba.manifest.error() + "\n" + ba.shown;
    }
    std::string failure = remember(ba.manifest->key(), a, ba.shown);
    for (const auto& [t, variant] : variants) {
      if (failure.empty()) {
        failure = check(where + ", transformation " + t->name, tallies_[t->name], a, ba, variant);
      }
    }
    return failure;
  }

  const std::map<std::string, Tally>& tallies() const { return tallies_; }
  std::size_t distinct_keys() const { return seen_.size(); }

private:
  std::string check(const std::string& where, Tally& tally, const Program& a, const Built& ba,
                    const Variant& variant) {
    const Program& b = variant.p;
    ++tally.applied;
    const Built bb = build(rng_, b);
    if (!bb.manifest) {
      return where + ": refused: " + bb.manifest.error() + "\nA:\n" + ba.shown + "\nB:\n" +
             bb.shown;
    }
    const std::string ka = ba.manifest->key(), kb = bb.manifest->key();
    const auto pair = [&] {
      return "\nA:\n" + ba.shown + "\nB:\n" + bb.shown + "\nexplain:\n" +
             to_text(explain(*ba.manifest, *bb.manifest));
    };
    if (variant.must_match && ka != kb) {
      return where + ": an equivalent program changed the key (needless miss)" + pair();
    }
    const std::string diff = a == b ? "" : first_difference(rng_, a, b, ka == kb ? 32 : 4);
    if (ka == kb) {
      ++tally.same_key;
      if (!diff.empty()) {
        return where + ": one key for two different programs (false hit), " + diff + pair();
      }
      return {};
    }
    tally.meaning_changed += diff.empty() ? 0 : 1;
    const std::string failure = remember(kb, b, bb.shown);
    return failure.empty() ? failure : where + ": " + failure;
  }

  // Every program keyed alike in this run must evaluate alike.
  std::string remember(const std::string& key, const Program& p, const std::string& shown) {
    const auto [it, fresh] = seen_.try_emplace(key, p, shown);
    if (fresh || it->second.first == p) {
      return {};
    }
    const std::string diff = first_difference(rng_, it->second.first, p, 24);
    if (diff.empty()) {
      return {};
    }
    return "two programs of this run share key " + key + " (false hit), " + diff + "\nA:\n" +
           it->second.second + "\nB:\n" + shown;
  }

  std::uint64_t seed_;
  Rng rng_;
  std::map<std::string, Tally> tallies_;
  std::map<std::string, std::pair<Program, std::string>> seen_;
};

TEST(ManifestDifferential, OpsAreClassifiedAsTheEvaluatorAssumes) {
  for (const OpInfo& op : kOps) {
    EXPECT_EQ(is_effectful_op(op.op), op.effect && !op.flagged) << op.op;
  }
}

TEST(ManifestDifferential, SameKeyOnlyForSameEvaluation) {
  const std::uint64_t seed = env_or("KCACHE_MANIFEST_FUZZ_SEED", 20261123);
  const std::uint64_t rounds = env_or("KCACHE_MANIFEST_FUZZ_ROUNDS", 80);
  const auto start = std::chrono::steady_clock::now();
  Fuzzer fuzzer(seed);
  for (std::uint64_t i = 0; i < rounds; ++i) {
    const std::string failure = fuzzer.round(i);
    ASSERT_TRUE(failure.empty()) << failure;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("manifest fuzz: seed %llu, %llu rounds, %zu distinct keys, %.2f s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(rounds),
              fuzzer.distinct_keys(), seconds);
  std::size_t same_key = 0, changed = 0;
  for (const auto& [name, t] : fuzzer.tallies()) {
    std::printf("  %-30s applied %4zu  same key %4zu  meaning changed %4zu\n", name.c_str(),
                t.applied, t.same_key, t.meaning_changed);
    same_key += t.same_key;
    changed += t.meaning_changed;
  }
  // Every transformation ran, and the generator makes both kinds of pairs.
  if (rounds >= 50) {
    EXPECT_EQ(fuzzer.tallies().size(), transforms().size());
  }
  EXPECT_GT(same_key, rounds);
  EXPECT_GT(changed, rounds / 2);
}

} // namespace
} // namespace kcache::cachekey
