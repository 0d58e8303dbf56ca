#include "cpu_bench.h"

#include <dlfcn.h>
#include <ffi.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

namespace kcache::compiler {
namespace {

constexpr std::uint64_t kMaxBenchBytes = 4ULL << 30;

// A shared object loaded from memory (memfd): nothing touches the disk.
class LoadedObject {
public:
  explicit LoadedObject(const std::string& bytes) {
    fd_ = ::memfd_create("kcache-variant.so", MFD_CLOEXEC);
    if (fd_ < 0 || ::write(fd_, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      error_ = "cannot stage the shared object in memory";
      return;
    }
    const std::string path = "/proc/self/fd/" + std::to_string(fd_);
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      error_ = ::dlerror();
    }
  }
  ~LoadedObject() {
    if (handle_ != nullptr) {
      ::dlclose(handle_);
    }
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;
  void* symbol(const std::string& name) const {
    return handle_ == nullptr ? nullptr : ::dlsym(handle_, name.c_str());
  }
  const std::string& error() const { return error_; }

private:
  int fd_ = -1;
  void* handle_ = nullptr;
  std::string error_;
};

// One argument's storage: a buffer (one copy per input set) or a scalar.
struct ArgData {
  const BenchArg* spec = nullptr;
  std::vector<std::vector<std::uint8_t>> sets; // buffers
  std::int64_t count = 0;
  std::int64_t int_value = 0; // scalars
  float f32 = 0;
  double f64 = 0;
  std::int32_t i32 = 0;
  void* pointer = nullptr; // what the call receives for a buffer
};

template <typename T>
void fill(std::vector<std::uint8_t>& bytes, const BenchArg& a, unsigned seed) {
  std::mt19937_64 rng(seed);
  T* data = reinterpret_cast<T*>(bytes.data());
  const std::size_t n = bytes.size() / sizeof(T);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(static_cast<T>(a.lo), static_cast<T>(a.hi));
    for (std::size_t i = 0; i < n; ++i) {
      data[i] = dist(rng);
    }
  } else {
    std::uniform_int_distribution<T> dist(static_cast<T>(a.lo), static_cast<T>(a.hi));
    for (std::size_t i = 0; i < n; ++i) {
      data[i] = dist(rng);
    }
  }
}

ffi_type* ffi_type_of(DType d) {
  switch (d) {
  case DType::kF32:
    return &ffi_type_float;
  case DType::kF64:
    return &ffi_type_double;
  case DType::kI32:
    return &ffi_type_sint32;
  case DType::kI64:
    return &ffi_type_sint64;
  }
  return &ffi_type_sint64;
}

// The arguments for one variant: shapes and its parameters decide the sizes.
class Arguments {
public:
  tl::expected<void, std::string> build(const BenchmarkSpec& bench, const Bindings& params) {
    Bindings scope = bench.shapes;
    scope.insert(params.begin(), params.end());
    std::uint64_t total = 0;
    args_.clear();
    args_.reserve(bench.args.size());
    for (const BenchArg& a : bench.args) {
      ArgData d;
      d.spec = &a;
      if (a.kind == BenchArg::Kind::kBuffer) {
        auto count = a.count->evaluate(scope);
        if (!count) {
          return tl::unexpected(count.error());
        }
        if (*count <= 0) {
          return tl::unexpected("buffer " + a.name + " has " + std::to_string(*count) +
                                " elements");
        }
        d.count = *count;
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
          d.sets.push_back(std::move(buffer));
        }
      } else {
        auto v = a.value->evaluate(scope);
        if (!v) {
          return tl::unexpected(v.error());
        }
        d.int_value = *v;
        d.i32 = static_cast<std::int32_t>(*v);
        d.f32 = static_cast<float>(*v);
        d.f64 = static_cast<double>(*v);
        if (a.dtype == DType::kI32 && d.i32 != *v) {
          return tl::unexpected("scalar " + a.name + " = " + std::to_string(*v) + " overflows i32");
        }
      }
      args_.push_back(std::move(d));
    }
    types_.clear();
    for (const ArgData& d : args_) {
      types_.push_back(d.spec->kind == BenchArg::Kind::kBuffer ? &ffi_type_pointer
                                                               : ffi_type_of(d.spec->dtype));
    }
    if (ffi_prep_cif(&cif_, FFI_DEFAULT_ABI, static_cast<unsigned>(types_.size()), &ffi_type_void,
                     types_.data()) != FFI_OK) {
      return tl::unexpected(std::string("libffi cannot describe this signature"));
    }
    return {};
  }

  // One call with input set `set`; outputs are zeroed first.
  void call(void* fn, int set) {
    std::vector<void*> values;
    values.reserve(args_.size());
    for (ArgData& d : args_) {
      if (d.spec->kind == BenchArg::Kind::kBuffer) {
        auto& storage = d.sets[static_cast<std::size_t>(set) % d.sets.size()];
        if (d.spec->output) {
          std::memset(storage.data(), 0, storage.size());
        }
        d.pointer = storage.data();
        values.push_back(&d.pointer);
      } else {
        values.push_back(d.spec->dtype == DType::kF32   ? static_cast<void*>(&d.f32)
                         : d.spec->dtype == DType::kF64 ? static_cast<void*>(&d.f64)
                         : d.spec->dtype == DType::kI32 ? static_cast<void*>(&d.i32)
                                                        : static_cast<void*>(&d.int_value));
      }
    }
    // FFI_FN is a C cast; the same conversion, spelled for C++.
    ffi_call(&cif_, reinterpret_cast<void (*)()>(fn), nullptr, values.data());
  }

  // The output buffers after the last call.
  std::vector<std::pair<const BenchArg*, const std::vector<std::uint8_t>*>> outputs() const {
    std::vector<std::pair<const BenchArg*, const std::vector<std::uint8_t>*>> out;
    for (const ArgData& d : args_) {
      if (d.spec->kind == BenchArg::Kind::kBuffer && d.spec->output) {
        out.emplace_back(d.spec, &d.sets.front());
      }
    }
    return out;
  }

private:
  std::vector<ArgData> args_;
  std::vector<ffi_type*> types_;
  ffi_cif cif_{};
};

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

using Outputs = std::vector<std::vector<std::uint8_t>>;

struct Measured {
  BenchResult result;
  Outputs outputs;
};

Measured measure(const BenchmarkSpec& bench, const std::string& entry, const BenchVariant& v) {
  Measured m;
  m.result.id = v.id;
  m.result.status = "error";
  LoadedObject object(v.binary);
  void* fn = object.symbol(entry);
  if (fn == nullptr) {
    m.result.error = "cannot load " + entry + ": " + object.error();
    return m;
  }
  Arguments args;
  if (auto built = args.build(bench, v.params); !built) {
    m.result.error = built.error();
    return m;
  }
  for (int i = 0; i < bench.warmup; ++i) {
    args.call(fn, i);
  }
  std::vector<double> times;
  for (int i = 0; i < bench.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    args.call(fn, i);
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(times.begin(), times.end());
  m.result.median_us = times[times.size() / 2];
  m.result.min_us = times.front();
  args.call(fn, 0); // the checked run: input set 0, as the reference's
  for (const auto& [spec, bytes] : args.outputs()) {
    m.outputs.push_back(*bytes);
  }
  m.result.status = "ok";
  return m;
}

void pin_to_one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    return;
  }
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0; --cpu) {
    if (CPU_ISSET(cpu, &set)) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof one, &one);
      return;
    }
  }
}

void emit(std::FILE* out, const BenchResult& r) {
  const std::string line = encode_bench_result(r) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

} // namespace

void run_cpu_bench(const BenchRequest& request, std::FILE* out) {
  auto search = parse_autotune(request.search_json);
  auto fail_all = [&](const std::string& why) {
    for (const BenchVariant& v : request.variants) {
      emit(out, BenchResult{v.id, "error", 0, 0, 0, why});
    }
  };
  if (!search) {
    return fail_all(search.error());
  }
  pin_to_one_cpu(); // one core, steady timings, no migration
  const BenchmarkSpec& bench = search->benchmark;
  const Measured reference = measure(bench, request.entry, request.reference);
  if (reference.result.status != "ok") {
    return fail_all("the reference variant failed: " + reference.result.error);
  }
  std::vector<const BenchArg*> output_specs;
  for (const BenchArg& a : bench.args) {
    if (a.kind == BenchArg::Kind::kBuffer && a.output) {
      output_specs.push_back(&a);
    }
  }
  for (const BenchVariant& v : request.variants) {
    Measured m = measure(bench, request.entry, v);
    if (m.result.status == "ok") {
      bool ok = m.outputs.size() == reference.outputs.size();
      for (std::size_t i = 0; ok && i < m.outputs.size(); ++i) {
        if (m.outputs[i].size() != reference.outputs[i].size()) {
          ok = false;
          break;
        }
        const DType d = output_specs[i]->dtype;
        const double err =
            d == DType::kF32
                ? compare_as<float>(m.outputs[i], reference.outputs[i], bench.tolerance, ok)
            : d == DType::kF64
                ? compare_as<double>(m.outputs[i], reference.outputs[i], bench.tolerance, ok)
            : d == DType::kI32
                ? compare_as<std::int32_t>(m.outputs[i], reference.outputs[i], 0, ok)
                : compare_as<std::int64_t>(m.outputs[i], reference.outputs[i], 0, ok);
        m.result.max_error = std::max(m.result.max_error, err);
      }
      if (!ok) {
        m.result.status = "wrong";
        m.result.error = "output differs from the reference (max error " +
                         std::to_string(m.result.max_error) + ")";
      }
    }
    emit(out, m.result);
  }
}

} // namespace kcache::compiler
