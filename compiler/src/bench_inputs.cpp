#include "bench_inputs.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace kcache::compiler {
namespace {

constexpr std::uint64_t kMaxBenchBytes = 4ULL << 30;

// splitmix64: seeded, fast (inputs run to hundreds of MB) and the same on every host.
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
void fill(std::vector<std::uint8_t>& bytes, const BenchArg& a, unsigned seed) {
  std::uint64_t state = seed;
  T* data = reinterpret_cast<T*>(bytes.data());
  const std::size_t n = bytes.size() / sizeof(T);
  const double span = a.hi - a.lo;
  for (std::size_t i = 0; i < n; ++i) {
    const double unit = static_cast<double>(next(state) >> 11) * 0x1.0p-53; // [0, 1)
    if constexpr (std::is_floating_point_v<T>) {
      data[i] = static_cast<T>(a.lo + span * unit);
    } else {
      data[i] = static_cast<T>(std::floor(a.lo + (span + 1) * unit));
    }
  }
}

template <typename T>
double compare_as(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want,
                  double tolerance, bool& ok) {
  const T* g = reinterpret_cast<const T*>(got.data());
  const T* w = reinterpret_cast<const T*>(want.data());
  double worst = 0;
  for (std::size_t i = 0; i < got.size() / sizeof(T); ++i) {
    const double err = std::fabs(static_cast<double>(g[i]) - static_cast<double>(w[i]));
    worst = std::max(worst, err);
    if (!(err <= tolerance * (1 + std::fabs(static_cast<double>(w[i]))))) {
      ok = false; // NaN fails here too
    }
  }
  return worst;
}

} // namespace

void summarize_times(std::vector<double> times_us, BenchResult& result) {
  if (times_us.empty()) {
    return;
  }
  std::sort(times_us.begin(), times_us.end());
  result.median_us = times_us[times_us.size() / 2];
  result.min_us = times_us.front();
}

Bindings bench_scope(const BenchmarkSpec& bench, const Bindings& params) {
  Bindings scope = bench.shapes;
  scope.insert(params.begin(), params.end());
  return scope;
}

tl::expected<std::string, std::string> args_signature(const BenchmarkSpec& bench,
                                                      const Bindings& params) {
  const Bindings scope = bench_scope(bench, params);
  std::string signature;
  for (const BenchArg& a : bench.args) {
    auto v =
        a.kind == BenchArg::Kind::kBuffer ? a.count->evaluate(scope) : a.value->evaluate(scope);
    if (!v) {
      return tl::unexpected(v.error());
    }
    signature += std::to_string(*v) + ",";
  }
  return signature;
}

tl::expected<std::vector<HostArg>, std::string> make_host_args(const BenchmarkSpec& bench,
                                                               const Bindings& params) {
  const Bindings scope = bench_scope(bench, params);
  std::vector<HostArg> args;
  args.reserve(bench.args.size());
  std::uint64_t total = 0;
  for (const BenchArg& a : bench.args) {
    HostArg h;
    h.spec = &a;
    if (a.kind == BenchArg::Kind::kScalar) {
      auto v = a.value->evaluate(scope);
      if (!v) {
        return tl::unexpected(v.error());
      }
      if (a.dtype == DType::kI32 && static_cast<std::int32_t>(*v) != *v) {
        return tl::unexpected("scalar " + a.name + " = " + std::to_string(*v) + " overflows i32");
      }
      h.value = *v;
      args.push_back(std::move(h));
      continue;
    }
    auto count = a.count->evaluate(scope);
    if (!count) {
      return tl::unexpected(count.error());
    }
    if (*count <= 0) {
      return tl::unexpected("buffer " + a.name + " has " + std::to_string(*count) + " elements");
    }
    const std::uint64_t bytes = static_cast<std::uint64_t>(*count) * dtype_size(a.dtype);
    const int sets = a.output ? 1 : bench.rotate;
    total += bytes * static_cast<std::uint64_t>(sets);
    if (total > kMaxBenchBytes) {
      return tl::unexpected(std::string("the benchmark's buffers exceed 4 GiB"));
    }
    for (int s = 0; s < sets; ++s) {
      std::vector<std::uint8_t> buffer(bytes, 0);
      if (!a.output) {
        const unsigned seed = a.seed + static_cast<unsigned>(s) * 7919U;
        switch (a.dtype) {
        case DType::kF32:
          fill<float>(buffer, a, seed);
          break;
        case DType::kF64:
          fill<double>(buffer, a, seed);
          break;
        case DType::kI32:
          fill<std::int32_t>(buffer, a, seed);
          break;
        case DType::kI64:
          fill<std::int64_t>(buffer, a, seed);
          break;
        }
      }
      h.sets.push_back(std::move(buffer));
    }
    args.push_back(std::move(h));
  }
  return args;
}

double compare_outputs(const BenchmarkSpec& bench, const OutputBytes& got, const OutputBytes& want,
                       bool& ok) {
  std::vector<DType> dtypes;
  for (const BenchArg& a : bench.args) {
    if (a.kind == BenchArg::Kind::kBuffer && a.output) {
      dtypes.push_back(a.dtype);
    }
  }
  if (got.size() != want.size() || got.size() != dtypes.size()) {
    ok = false;
    return 0;
  }
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].size() != want[i].size()) {
      ok = false;
      continue;
    }
    const double tol = bench.tolerance;
    const double err = dtypes[i] == DType::kF32   ? compare_as<float>(got[i], want[i], tol, ok)
                       : dtypes[i] == DType::kF64 ? compare_as<double>(got[i], want[i], tol, ok)
                       : dtypes[i] == DType::kI32
                           ? compare_as<std::int32_t>(got[i], want[i], 0, ok)
                           : compare_as<std::int64_t>(got[i], want[i], 0, ok);
    worst = std::max(worst, err);
  }
  return worst;
}

} // namespace kcache::compiler
