#pragma once
// A max-autotune search: a kernel template (a CompileSpec whose source reads
// its parameters as macros), a parameter space, constraints, a benchmark and
// a strategy. Plain data, from JSON:
//
//   {"params": {"BM": [16, 32, 64], "BK": {"range": [8, 64, 8]}, "U": {"pow2": [1, 8]}},
//    "constraints": ["BM*BK*4 + BK*BN*4 <= 49152"],
//    "benchmark": {
//      "shapes": {"M": 512, "N": 512, "K": 512},        // the guards' symbol values
//      "args": [{"buffer": "A", "dtype": "f32", "count": "M*K", "init": "uniform", "seed": 1},
//               {"buffer": "C", "dtype": "f32", "count": "M*N", "output": true},
//               {"scalar": "M", "dtype": "i32"}],
//      "launch": {"grid": "ceil_div(M, BM)", "block": "BM", "shared_bytes": "0"},   // GPU
//      "reference": {"BM": 16, "BK": 8, "U": 1},         // a variant known to be right
//      "tolerance": 1e-3, "warmup": 1, "repeats": 5, "rotate": 2},
//    "strategy": {"kind": "halving", "eta": 2, "discard": 2, "first_warmup": 0}
//                | {"kind": "random", "k": 8, "seed": 1}
//                | {"kind": "exhaustive"},
//    "budget": {"max_variants": 256, "max_seconds": 600}}
//
// Each variant compiles as the template with -DNAME=VALUE per parameter.

#include <kcache/compiler/compile_spec.h>
#include <kcache/compiler/expression.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kcache::compiler {

// bf16 and f16 are for buffers only (tensor-core kernels' inputs and
// outputs): generated and compared through float, never as scalars.
enum class DType { kF32, kF64, kI32, kI64, kBF16, kF16 };
std::size_t dtype_size(DType dtype);

struct BenchArg {
  enum class Kind { kBuffer, kScalar };
  Kind kind = Kind::kBuffer;
  std::string name; // buffer name, or the scalar's expression
  DType dtype = DType::kF32;
  std::optional<Expression> count; // buffers: elements
  bool output = false;             // compared against the reference
  double lo = -1, hi = 1;          // uniform init range
  std::uint32_t seed = 1;
  std::optional<Expression> value; // scalars
};

struct LaunchGeometry {
  std::optional<Expression> grid, block, shared_bytes;
};

struct BenchmarkSpec {
  Bindings shapes;
  std::vector<BenchArg> args;
  LaunchGeometry launch;
  Bindings reference; // the reference variant's parameters
  double tolerance = 1e-3;
  int warmup = 1;
  int repeats = 5;
  int rotate = 2; // input sets cycled between repeats (cold caches, as in training)
};

struct Strategy {
  enum class Kind { kExhaustive, kRandom, kHalving };
  Kind kind = Kind::kExhaustive;
  std::size_t k = 8;      // random: how many variants
  std::uint32_t seed = 1; // random: which ones
  int eta = 2;            // halving: keep 1/eta per round
  // Halving: after a round, a variant slower than `discard` times the best so
  // far is dropped (0: never). Most of an exhaustive search's time goes to
  // the slow variants; a few runs tell them apart.
  double discard = 2.0;
  // Halving: warm-up calls per variant in the first round (one timed run,
  // then the checked run). A cold call is good enough to tell 2x apart; later
  // rounds use the benchmark's warm-up.
  int first_warmup = 0;
};

struct Budget {
  std::size_t max_variants = 256;
  double max_seconds = 600;
};

struct ParamSpace {
  std::string name;
  std::vector<std::int64_t> values;
};

struct AutotuneSearch {
  std::vector<ParamSpace> params;
  std::vector<Expression> constraints;
  BenchmarkSpec benchmark;
  Strategy strategy;
  Budget budget;
  std::string json; // as given: part of the autotune job's identity
};

tl::expected<AutotuneSearch, std::string> parse_autotune(std::string_view json_text);

struct Variant {
  Bindings params;
  std::string id; // "BM=32,BN=64": stable, readable
};

struct PrunedVariant {
  Variant variant;
  std::string reason; // the constraint that failed, or its evaluation error
};

struct Space {
  std::vector<Variant> variants; // pass every constraint, in a stable order
  std::vector<PrunedVariant> pruned;
};

// Every point of the parameter space, split by the constraints; the strategy's
// selection (random-k) and the budget's max_variants are applied to `variants`.
tl::expected<Space, std::string> expand(const AutotuneSearch& search);

// The template compiled for one variant.
CompileSpec variant_spec(const CompileSpec& base, const Variant& variant);

// Successive halving: which survivors go on after a round, by time.
std::size_t halving_keep(std::size_t survivors, int eta);

} // namespace kcache::compiler
