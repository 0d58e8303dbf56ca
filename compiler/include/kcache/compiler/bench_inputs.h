#pragma once
// What the CPU and GPU benchmark runners share: the benchmark's arguments on
// the host (seeded input sets, zeroed outputs, evaluated scalars) and the
// comparison of a variant's outputs with the reference's. Public for bench
// tools that check variants against a library on the same inputs
// (bench/gpu_autotune: cuBLAS).

#include <kcache/compiler/autotune_spec.h>
#include <kcache/compiler/bench_protocol.h>

#include <tl/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kcache::compiler {

struct HostArg {
  const BenchArg* spec = nullptr;
  std::vector<std::vector<std::uint8_t>> sets; // buffers: `rotate` input sets, or one output
  std::int64_t value = 0;                      // scalars
};

// A scalar argument held in every width; address() is what a call passes
// (libffi and cuLaunchKernel both take a pointer to each argument).
struct ScalarSlot {
  std::int64_t i64 = 0;
  std::int32_t i32 = 0;
  float f32 = 0;
  double f64 = 0;
  void set(std::int64_t v) {
    i64 = v;
    i32 = static_cast<std::int32_t>(v);
    f32 = static_cast<float>(v);
    f64 = static_cast<double>(v);
  }
  void* address(DType d) {
    return d == DType::kF32   ? static_cast<void*>(&f32)
           : d == DType::kF64 ? static_cast<void*>(&f64)
           : d == DType::kI32 ? static_cast<void*>(&i32)
                              : static_cast<void*>(&i64);
  }
};

// Sizes and scalars evaluate over the shapes and the variant's parameters.
Bindings bench_scope(const BenchmarkSpec& bench, const Bindings& params);
// Variants with equal signatures (buffer sizes, scalar values) get identical
// arguments: runners build them once and reuse them.
tl::expected<std::string, std::string> args_signature(const BenchmarkSpec& bench,
                                                      const Bindings& params);
tl::expected<std::vector<HostArg>, std::string> make_host_args(const BenchmarkSpec& bench,
                                                               const Bindings& params);

// Fills the result's median and minimum (microseconds) from the repeats.
void summarize_times(std::vector<double> times_us, BenchResult& result);

// Element i of a buffer of `dtype` as a double (16-bit floats decoded):
// host-side checks of a GPU library's result read the inputs through it.
double element_value(DType dtype, const std::vector<std::uint8_t>& bytes, std::size_t i);

using OutputBytes = std::vector<std::vector<std::uint8_t>>;
// Floats within tolerance * (1 + |want|), integers exactly; NaN never matches.
// Returns the largest absolute error; `ok` turns false on any mismatch.
double compare_outputs(const BenchmarkSpec& bench, const OutputBytes& got, const OutputBytes& want,
                       bool& ok);

} // namespace kcache::compiler
