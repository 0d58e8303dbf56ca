#include <kcache/compiler/autotune_spec.h>
#include <kcache/protocol/did_you_mean.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <span>
#include <tuple>

namespace kcache::compiler {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxValuesPerParam = 4096;
constexpr std::size_t kMaxSpace = 1'000'000;

tl::unexpected<std::string> fail(const std::string& what) {
  return tl::unexpected("autotune: " + what);
}

std::vector<std::int64_t> integers(const json& list) {
  std::vector<std::int64_t> out;
  for (const json& v : list) {
    out.push_back(protocol::json_integer<std::int64_t>(v));
  }
  return out;
}

tl::expected<std::vector<std::int64_t>, std::string> param_values(const std::string& name,
                                                                  const json& spec) {
  std::vector<std::int64_t> values;
  if (spec.is_array()) {
    for (const json& v : spec) {
      if (!v.is_number_integer()) {
        return fail("parameter " + name + ": values must be integers");
      }
      values.push_back(protocol::json_integer<std::int64_t>(v));
    }
  } else if (spec.is_object() && spec.contains("range")) {
    const auto r = integers(spec["range"]);
    const std::int64_t step = r.size() == 3 ? r[2] : 1;
    if (r.size() < 2 || step <= 0 || r[1] < r[0] ||
        (r[1] - r[0]) / step >= static_cast<std::int64_t>(kMaxValuesPerParam)) {
      return fail("parameter " + name + ": range is [lo, hi, step>0] with at most " +
                  std::to_string(kMaxValuesPerParam) + " values");
    }
    for (std::int64_t v = r[0]; v <= r[1]; v += step) {
      values.push_back(v);
    }
  } else if (spec.is_object() && spec.contains("pow2")) {
    const auto r = integers(spec["pow2"]);
    if (r.size() != 2 || r[0] <= 0 || r[1] < r[0] || r[1] > (std::int64_t{1} << 40)) {
      return fail("parameter " + name + ": pow2 is [lo>0, hi<=2^40]");
    }
    for (std::int64_t v = 1; v <= r[1]; v *= 2) {
      if (v >= r[0]) {
        values.push_back(v);
      }
    }
  } else {
    return fail("parameter " + name +
                ": give a list, {\"range\": [lo, hi, step]} or {\"pow2\": [lo, hi]}");
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.empty() || values.size() > kMaxValuesPerParam) {
    return fail("parameter " + name + " needs 1 to " + std::to_string(kMaxValuesPerParam) +
                " values");
  }
  return values;
}

tl::expected<std::optional<Expression>, std::string> optional_expression(const json& doc,
                                                                         const char* field) {
  if (!doc.contains(field)) {
    return std::optional<Expression>{};
  }
  const json& v = doc[field];
  auto e = Expression::parse(v.is_string() ? v.get<std::string>() : v.dump());
  if (!e) {
    return tl::unexpected(e.error());
  }
  return std::optional<Expression>(std::move(*e));
}

tl::expected<DType, std::string> parse_dtype(const std::string& name) {
  if (name == "f32") {
    return DType::kF32;
  }
  if (name == "f64") {
    return DType::kF64;
  }
  if (name == "i32") {
    return DType::kI32;
  }
  if (name == "i64") {
    return DType::kI64;
  }
  if (name == "bf16") {
    return DType::kBF16;
  }
  if (name == "f16") {
    return DType::kF16;
  }
  return fail("unknown dtype '" + name + "' (valid: f32, f64, i32, i64, bf16, f16)");
}

// The members each object of a search may have: any other is refused, not
// dropped (a mistyped "budget" would search with the defaults).
constexpr std::array<std::string_view, 5> kSearchFields = {"params", "constraints", "benchmark",
                                                           "strategy", "budget"};
constexpr std::array<std::string_view, 8> kBenchmarkFields = {
    "shapes", "args", "launch", "reference", "tolerance", "warmup", "repeats", "rotate"};
constexpr std::array<std::string_view, 7> kArgFields = {"buffer", "scalar", "dtype", "count",
                                                        "output", "seed",   "range"};
constexpr std::array<std::string_view, 3> kLaunchFields = {"grid", "block", "shared_bytes"};
constexpr std::array<std::string_view, 6> kStrategyFields = {"kind", "k",       "seed",
                                                             "eta",  "discard", "first_warmup"};
constexpr std::array<std::string_view, 2> kBudgetFields = {"max_variants", "max_seconds"};

tl::expected<BenchmarkSpec, std::string> parse_benchmark(const json& doc) {
  BenchmarkSpec b;
  if (auto unknown = protocol::unknown_field(doc, kBenchmarkFields, "autotune: benchmark")) {
    return tl::unexpected(std::move(*unknown));
  }
  for (const json& a : doc.at("args")) {
    if (auto unknown = protocol::unknown_field(a, kArgFields, "autotune: benchmark.args[]")) {
      return tl::unexpected(std::move(*unknown));
    }
  }
  if (doc.contains("launch")) {
    if (auto unknown =
            protocol::unknown_field(doc["launch"], kLaunchFields, "autotune: benchmark.launch")) {
      return tl::unexpected(std::move(*unknown));
    }
  }
  // Named, not temporaries: iterating a temporary's items() trips GCC 12's
  // -Wmaybe-uninitialized inside nlohmann.
  const json shapes = doc.value("shapes", json::object());
  for (const auto& [name, value] : shapes.items()) {
    if (!value.is_number_integer()) {
      return fail("shape " + name + " must be an integer");
    }
    b.shapes[name] = protocol::json_integer<std::int64_t>(value);
  }
  for (const json& a : doc.at("args")) {
    BenchArg arg;
    auto dtype = parse_dtype(a.value("dtype", std::string("f32")));
    if (!dtype) {
      return tl::unexpected(dtype.error());
    }
    arg.dtype = *dtype;
    if (a.contains("buffer")) {
      arg.kind = BenchArg::Kind::kBuffer;
      arg.name = a["buffer"].get<std::string>();
      auto count = optional_expression(a, "count");
      if (!count || !*count) {
        return fail("buffer " + arg.name +
                    " needs a count: " + (count ? "missing" : count.error()));
      }
      arg.count = std::move(**count);
      arg.output = a.value("output", false);
      arg.seed = protocol::json_integer(a, "seed", 1U);
      if (a.contains("range")) {
        const auto r = a["range"].get<std::vector<double>>();
        if (r.size() != 2 || !(r[0] <= r[1])) {
          return fail("buffer " + arg.name + ": range is [lo, hi]");
        }
        arg.lo = r[0];
        arg.hi = r[1];
      }
    } else if (a.contains("scalar")) {
      if (arg.dtype == DType::kBF16 || arg.dtype == DType::kF16) {
        return fail("scalar " + a["scalar"].dump() +
                    ": bf16 and f16 are buffer dtypes (valid for a scalar: f32, f64, i32, i64)");
      }
      arg.kind = BenchArg::Kind::kScalar;
      arg.name = a["scalar"].is_string() ? a["scalar"].get<std::string>() : a["scalar"].dump();
      auto value = Expression::parse(arg.name);
      if (!value) {
        return tl::unexpected(value.error());
      }
      arg.value = std::move(*value);
    } else {
      return fail("each benchmark arg is {\"buffer\": ...} or {\"scalar\": ...}");
    }
    b.args.push_back(std::move(arg));
  }
  if (std::none_of(b.args.begin(), b.args.end(), [](const BenchArg& a) { return a.output; })) {
    return fail("the benchmark needs at least one output buffer to check");
  }
  if (doc.contains("launch")) {
    for (auto [field, out] :
         {std::pair{"grid", &b.launch.grid}, std::pair{"block", &b.launch.block},
          std::pair{"shared_bytes", &b.launch.shared_bytes}}) {
      auto e = optional_expression(doc["launch"], field);
      if (!e) {
        return tl::unexpected(e.error());
      }
      *out = std::move(*e);
    }
  }
  const json reference = doc.value("reference", json::object());
  for (const auto& [name, value] : reference.items()) {
    if (!value.is_number_integer()) {
      return fail("reference parameter " + name + " must be an integer");
    }
    b.reference[name] = protocol::json_integer<std::int64_t>(value);
  }
  b.tolerance = doc.value("tolerance", 1e-3);
  b.warmup = std::clamp(protocol::json_integer(doc, "warmup", 1), 0, 100);
  b.repeats = std::clamp(protocol::json_integer(doc, "repeats", 5), 1, 1000);
  b.rotate = std::clamp(protocol::json_integer(doc, "rotate", 2), 1, 16);
  return b;
}

std::string variant_id(const Bindings& params) {
  std::string id;
  for (const auto& [name, value] : params) {
    id += (id.empty() ? "" : ",") + name + "=" + std::to_string(value);
  }
  return id;
}

} // namespace

std::size_t dtype_size(DType dtype) {
  if (dtype == DType::kBF16 || dtype == DType::kF16) {
    return 2;
  }
  return dtype == DType::kF64 || dtype == DType::kI64 ? 8 : 4;
}

tl::expected<AutotuneSearch, std::string> parse_autotune(std::string_view json_text) {
  const json doc = protocol::parse_json_or_discarded(json_text);
  if (!doc.is_object()) {
    return fail("the search is not a JSON object");
  }
  try {
    AutotuneSearch s;
    s.json = protocol::json_text(doc);
    for (const auto& [object, known, where] :
         {std::tuple{&doc, std::span<const std::string_view>(kSearchFields), "autotune"},
          std::tuple{doc.contains("strategy") ? &doc["strategy"] : nullptr,
                     std::span<const std::string_view>(kStrategyFields), "autotune: strategy"},
          std::tuple{doc.contains("budget") ? &doc["budget"] : nullptr,
                     std::span<const std::string_view>(kBudgetFields), "autotune: budget"}}) {
      if (object == nullptr) {
        continue;
      }
      if (auto unknown = protocol::unknown_field(*object, known, where)) {
        return tl::unexpected(std::move(*unknown));
      }
    }
    // The two members without a default, named with their shape when absent.
    if (!doc.contains("params") || !doc["params"].is_object()) {
      return fail(R"('params' must be an object: {"NAME": [values] | {"range": [lo, hi, step]} )"
                  R"(| {"pow2": [lo, hi]}})");
    }
    if (!doc.contains("benchmark") || !doc["benchmark"].is_object() ||
        !doc["benchmark"].contains("args") || !doc["benchmark"]["args"].is_array()) {
      return fail(R"('benchmark' must be an object with an "args" list )"
                  R"(([{"buffer": ...} | {"scalar": ...}]))");
    }
    std::size_t space = 1;
    for (const auto& [name, values] : doc.at("params").items()) {
      auto v = param_values(name, values);
      if (!v) {
        return tl::unexpected(v.error());
      }
      space *= v->size();
      if (space > kMaxSpace) {
        return fail("the parameter space has over " + std::to_string(kMaxSpace) + " points");
      }
      s.params.push_back({name, std::move(*v)});
    }
    if (s.params.empty()) {
      return fail("no parameters to tune");
    }
    for (const json& c : doc.value("constraints", json::array())) {
      auto e = Expression::parse(c.get<std::string>());
      if (!e) {
        return tl::unexpected(e.error());
      }
      s.constraints.push_back(std::move(*e));
    }
    auto bench = parse_benchmark(doc.at("benchmark"));
    if (!bench) {
      return tl::unexpected(bench.error());
    }
    s.benchmark = std::move(*bench);
    const json strategy = doc.value("strategy", json::object());
    const std::string kind = strategy.value("kind", std::string("exhaustive"));
    if (kind == "exhaustive") {
      s.strategy.kind = Strategy::Kind::kExhaustive;
    } else if (kind == "random") {
      s.strategy.kind = Strategy::Kind::kRandom;
      s.strategy.k =
          std::max<std::size_t>(1, protocol::json_integer(strategy, "k", std::size_t{8}));
      s.strategy.seed = protocol::json_integer(strategy, "seed", 1U);
    } else if (kind == "halving") {
      s.strategy.kind = Strategy::Kind::kHalving;
      s.strategy.eta = std::clamp(protocol::json_integer(strategy, "eta", 2), 2, 16);
      s.strategy.discard = strategy.value("discard", s.strategy.discard);
      if (s.strategy.discard != 0 && !(s.strategy.discard > 1)) {
        return fail("strategy: discard is 0 (off) or a factor > 1, not " +
                    std::to_string(s.strategy.discard));
      }
      s.strategy.first_warmup = std::clamp(
          protocol::json_integer(strategy, "first_warmup", s.strategy.first_warmup), 0, 100);
    } else {
      return fail("unknown strategy '" + kind + "' (valid: exhaustive, random, halving)");
    }
    const json budget = doc.value("budget", json::object());
    s.budget.max_variants =
        std::max<std::size_t>(1, protocol::json_integer(budget, "max_variants", std::size_t{256}));
    s.budget.max_seconds = budget.value("max_seconds", 600.0);
    return s;
  } catch (const json::exception& e) {
    return fail(e.what());
  }
}

tl::expected<Space, std::string> expand(const AutotuneSearch& search) {
  Space out;
  std::vector<std::size_t> index(search.params.size(), 0);
  while (true) {
    Variant v;
    for (std::size_t i = 0; i < search.params.size(); ++i) {
      v.params[search.params[i].name] = search.params[i].values[index[i]];
    }
    v.id = variant_id(v.params);
    Bindings scope = search.benchmark.shapes;
    scope.insert(v.params.begin(), v.params.end());
    std::string reason;
    for (const Expression& c : search.constraints) {
      auto ok = c.evaluate(scope);
      if (!ok) {
        reason = ok.error();
        break;
      }
      if (*ok == 0) {
        reason = "violates " + c.text();
        break;
      }
    }
    if (reason.empty()) {
      out.variants.push_back(std::move(v));
    } else {
      out.pruned.push_back({std::move(v), std::move(reason)});
    }
    // Next point: the last parameter varies fastest.
    std::size_t i = search.params.size();
    while (i > 0 && ++index[i - 1] == search.params[i - 1].values.size()) {
      index[--i] = 0;
    }
    if (i == 0) {
      break;
    }
  }
  std::size_t keep = std::min(out.variants.size(), search.budget.max_variants);
  if (search.strategy.kind == Strategy::Kind::kRandom) {
    keep = std::min(keep, search.strategy.k);
  }
  if (keep < out.variants.size()) {
    // A seeded sample, kept in space order so the table reads naturally.
    std::vector<std::size_t> order(out.variants.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(search.strategy.seed);
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(keep);
    std::sort(order.begin(), order.end());
    std::vector<Variant> chosen;
    chosen.reserve(keep);
    for (std::size_t i : order) {
      chosen.push_back(std::move(out.variants[i]));
    }
    out.variants = std::move(chosen);
  }
  if (out.variants.empty()) {
    return fail("every variant violates the constraints (" + std::to_string(out.pruned.size()) +
                " pruned)");
  }
  return out;
}

CompileSpec variant_spec(const CompileSpec& base, const Variant& variant) {
  CompileSpec spec = base;
  for (const auto& [name, value] : variant.params) {
    spec.options.push_back("-D" + name + "=" + std::to_string(value));
  }
  return spec;
}

std::size_t halving_keep(std::size_t survivors, int eta) {
  return std::max<std::size_t>(1, survivors / static_cast<std::size_t>(std::max(2, eta)));
}

} // namespace kcache::compiler
