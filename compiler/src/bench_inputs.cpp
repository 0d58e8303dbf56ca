#include <kcache/compiler/bench_inputs.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

namespace kcache::compiler {
namespace {

constexpr std::uint64_t kMaxBenchBytes = 4ULL << 30;

// splitmix64: seeded, fast (inputs run to hundreds of MB) and the same on every host.
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL); // kGamma
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The 16-bit float formats, held as their bits. Conversions round to
// nearest even, as the GPU's cvt.rn does.
struct BF16 {
  std::uint16_t bits = 0;
  static BF16 from(double v) {
    const auto f = std::bit_cast<std::uint32_t>(static_cast<float>(v));
    if (std::isnan(static_cast<float>(v))) {
      return {static_cast<std::uint16_t>((f >> 16) | 0x40U)};
    }
    return {static_cast<std::uint16_t>((f + 0x7fffU + ((f >> 16) & 1U)) >> 16)};
  }
  explicit operator double() const {
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
  }
};

struct F16 {
  std::uint16_t bits = 0;
  static F16 from(double v) {
    const auto f = std::bit_cast<std::uint32_t>(static_cast<float>(v));
    const auto sign = static_cast<std::uint32_t>((f >> 16) & 0x8000U);
    const auto biased = static_cast<int>((f >> 23) & 0xffU);
    std::uint32_t mantissa = f & 0x7fffffU;
    if (biased == 0xff) { // inf, NaN
      return {static_cast<std::uint16_t>(sign | 0x7c00U | (mantissa != 0 ? 0x200U : 0))};
    }
    const int exponent = biased - 127 + 15;
    if (exponent >= 31) {
      return {static_cast<std::uint16_t>(sign | 0x7c00U)};
    }
    // Normal: drop 13 bits; subnormal: shift the implicit 1 in too. Rounding
    // may carry into the exponent, which is the right result.
    int shift = 13;
    if (exponent <= 0) {
      if (exponent < -10) {
        return {static_cast<std::uint16_t>(sign)};
      }
      mantissa |= 0x800000U;
      shift = 14 - exponent;
    }
    std::uint32_t h = mantissa >> shift;
    if (exponent > 0) {
      h |= static_cast<std::uint32_t>(exponent) << 10;
    }
    const std::uint32_t rest = mantissa & ((1U << shift) - 1);
    const std::uint32_t half = 1U << (shift - 1);
    if (rest > half || (rest == half && (h & 1U) != 0)) {
      ++h;
    }
    return {static_cast<std::uint16_t>(sign | h)};
  }
  explicit operator double() const {
    const double sign = (bits & 0x8000U) != 0 ? -1 : 1;
    const int exponent = (bits >> 10) & 0x1f;
    const int mantissa = bits & 0x3ff;
    if (exponent == 0x1f) {
      return mantissa != 0 ? std::nan("") : sign * INFINITY;
    }
    return exponent == 0 ? sign * std::ldexp(mantissa, -24)
                         : sign * std::ldexp(mantissa + 1024, exponent - 25);
  }
};

constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ULL; // splitmix64's increment

// Elements [begin, end) of a buffer. splitmix64 is a counter: element i draws
// from the state seed + i·γ, so any range can be filled on its own.
template <typename T>
void fill_range(T* data, std::size_t begin, std::size_t end, const BenchArg& a, unsigned seed) {
  std::uint64_t state = seed + begin * kGamma;
  const double span = a.hi - a.lo;
  for (std::size_t i = begin; i < end; ++i) {
    const double unit = static_cast<double>(next(state) >> 11) * 0x1.0p-53; // [0, 1)
    if constexpr (std::is_floating_point_v<T>) {
      data[i] = static_cast<T>(a.lo + span * unit);
    } else if constexpr (std::is_same_v<T, BF16> || std::is_same_v<T, F16>) {
      data[i] = T::from(a.lo + span * unit);
    } else {
      data[i] = static_cast<T>(std::floor(a.lo + (span + 1) * unit));
    }
  }
}

// A GEMM's inputs run to hundreds of millions of elements (a second or more
// on one core, paid again by every search): large buffers are filled by
// several threads, each a range, the values the same as one thread's.
template <typename T>
void fill(std::vector<std::uint8_t>& bytes, const BenchArg& a, unsigned seed) {
  T* data = reinterpret_cast<T*>(bytes.data());
  const std::size_t n = bytes.size() / sizeof(T);
  constexpr std::size_t kPerThread = std::size_t{1} << 22;
  const std::size_t threads = std::clamp<std::size_t>(
      std::min<std::size_t>(n / kPerThread, std::thread::hardware_concurrency()), 1, 16);
  if (threads == 1) {
    fill_range(data, 0, n, a, seed);
    return;
  }
  std::vector<std::jthread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t begin = n * t / threads, end = n * (t + 1) / threads;
    try {
      workers.emplace_back([=, &a] { fill_range(data, begin, end, a, seed); });
    } catch (const std::system_error&) {
      fill_range(data, begin, end, a, seed); // no thread to be had (RLIMIT_AS, RLIMIT_NPROC)
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
        case DType::kBF16:
          fill<BF16>(buffer, a, seed);
          break;
        case DType::kF16:
          fill<F16>(buffer, a, seed);
          break;
        }
      }
      h.sets.push_back(std::move(buffer));
    }
    args.push_back(std::move(h));
  }
  return args;
}

double element_value(DType dtype, const std::vector<std::uint8_t>& bytes, std::size_t i) {
  auto at = [&]<typename T>(T /*type*/) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  };
  switch (dtype) {
  case DType::kF32:
    return at(float{});
  case DType::kF64:
    return at(double{});
  case DType::kI32:
    return at(std::int32_t{});
  case DType::kI64:
    return at(std::int64_t{});
  case DType::kBF16:
    return at(BF16{});
  case DType::kF16:
    return at(F16{});
  }
  return 0;
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
    double err = 0;
    switch (dtypes[i]) {
    case DType::kF32:
      err = compare_as<float>(got[i], want[i], tol, ok);
      break;
    case DType::kF64:
      err = compare_as<double>(got[i], want[i], tol, ok);
      break;
    case DType::kI32:
      err = compare_as<std::int32_t>(got[i], want[i], 0, ok);
      break;
    case DType::kI64:
      err = compare_as<std::int64_t>(got[i], want[i], 0, ok);
      break;
    case DType::kBF16:
      err = compare_as<BF16>(got[i], want[i], tol, ok);
      break;
    case DType::kF16:
      err = compare_as<F16>(got[i], want[i], tol, ok);
      break;
    }
    worst = std::max(worst, err);
  }
  return worst;
}

} // namespace kcache::compiler
