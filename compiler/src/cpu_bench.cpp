#include "cpu_bench.h"

#include <kcache/compiler/bench_inputs.h>
#include <kcache/compiler/memory_object.h>

#include <ffi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

namespace kcache::compiler {
namespace {

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
  case DType::kBF16: // buffers only: parse_autotune refuses them as scalars
  case DType::kF16:
    break;
  }
  return &ffi_type_sint64;
}

// A variant's call through libffi, over the host arguments; kept while
// variants share a signature (inputs are generated once per search).
class Arguments {
public:
  tl::expected<void, std::string> build(const BenchmarkSpec& bench, const Bindings& params) {
    auto signature = args_signature(bench, params);
    if (!signature) {
      return tl::unexpected(signature.error());
    }
    if (built_ && *signature == signature_) {
      return {};
    }
    built_ = false;
    auto args = make_host_args(bench, params);
    if (!args) {
      return tl::unexpected(args.error());
    }
    args_ = std::move(*args);
    scalars_.assign(args_.size(), ScalarSlot{});
    pointers_.assign(args_.size(), nullptr);
    types_.clear();
    for (std::size_t i = 0; i < args_.size(); ++i) {
      const BenchArg& spec = *args_[i].spec;
      if (spec.kind == BenchArg::Kind::kBuffer) {
        types_.push_back(&ffi_type_pointer);
        continue;
      }
      types_.push_back(ffi_type_of(spec.dtype));
      scalars_[i].set(args_[i].value);
    }
    if (ffi_prep_cif(&cif_, FFI_DEFAULT_ABI, static_cast<unsigned>(types_.size()), &ffi_type_void,
                     types_.data()) != FFI_OK) {
      return tl::unexpected(std::string("libffi cannot describe this signature"));
    }
    signature_ = *signature;
    built_ = true;
    return {};
  }

  // One call with input set `set`; outputs are zeroed first.
  void call(void* fn, int set) {
    std::vector<void*> values;
    values.reserve(args_.size());
    for (std::size_t i = 0; i < args_.size(); ++i) {
      HostArg& a = args_[i];
      if (a.spec->kind == BenchArg::Kind::kBuffer) {
        auto& storage = a.sets[static_cast<std::size_t>(set) % a.sets.size()];
        if (a.spec->output) {
          std::memset(storage.data(), 0, storage.size());
        }
        pointers_[i] = storage.data();
        values.push_back(&pointers_[i]);
      } else {
        values.push_back(scalars_[i].address(a.spec->dtype));
      }
    }
    // FFI_FN is a C cast; the same conversion, spelled for C++.
    ffi_call(&cif_, reinterpret_cast<void (*)()>(fn), nullptr, values.data());
  }

  OutputBytes outputs() const {
    OutputBytes out;
    for (const HostArg& a : args_) {
      if (a.spec->kind == BenchArg::Kind::kBuffer && a.spec->output) {
        out.push_back(a.sets.front());
      }
    }
    return out;
  }

private:
  bool built_ = false;
  std::string signature_;
  std::vector<HostArg> args_;
  std::vector<ScalarSlot> scalars_;
  std::vector<void*> pointers_;
  std::vector<ffi_type*> types_;
  ffi_cif cif_{};
};

struct Measured {
  BenchResult result;
  OutputBytes outputs;
};

Measured measure(Arguments& args, const BenchmarkSpec& bench, const std::string& entry,
                 const BenchVariant& v, bool check) {
  Measured m;
  m.result.id = v.id;
  m.result.status = "error";
  MemoryObject object(v.binary);
  void* fn = object.symbol(entry);
  if (fn == nullptr) {
    m.result.error = "cannot load " + entry + ": " + object.error();
    return m;
  }
  if (auto built = args.build(bench, v.params); !built) {
    m.result.error = built.error();
    return m;
  }
  // The checked outputs are those of the first call on input set 0, a
  // warm-up's or the first timed run's (every call zeroes the outputs first),
  // so checking costs no call of its own: in a halving's first round of one
  // timed run per variant, that was half of the calls.
  bool checked = !check;
  const auto keep_outputs = [&](int i) {
    if (!checked && i == 0) {
      m.outputs = args.outputs();
      checked = true;
    }
  };
  for (int i = 0; i < bench.warmup; ++i) {
    args.call(fn, i);
    keep_outputs(i);
  }
  std::vector<double> times;
  for (int i = 0; i < bench.repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    args.call(fn, i);
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
    keep_outputs(i);
  }
  summarize_times(std::move(times), m.result);
  if (!checked) {
    args.call(fn, 0); // no call yet: the checked run, input set 0 as the reference's
    m.outputs = args.outputs();
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

} // namespace

void run_cpu_bench(const BenchRequest& request, std::FILE* out) {
  auto search = parse_autotune(request.search_json);
  auto fail_all = [&](const std::string& why) {
    for (const BenchVariant& v : request.variants) {
      write_bench_result(out, BenchResult{v.id, "error", 0, 0, 0, why});
    }
  };
  if (!search) {
    return fail_all(search.error());
  }
  pin_to_one_cpu(); // one core, steady timings, no migration
  const BenchmarkSpec& bench = search->benchmark;
  Arguments args;
  const Measured reference = request.check
                                 ? measure(args, bench, request.entry, request.reference, true)
                                 : Measured{BenchResult{"reference", "ok", 0, 0, 0, ""}, {}};
  if (reference.result.status != "ok") {
    return fail_all("the reference variant failed: " + reference.result.error);
  }
  for (const BenchVariant& v : request.variants) {
    Measured m = measure(args, bench, request.entry, v, request.check);
    if (m.result.status == "ok" && request.check) {
      bool ok = true;
      m.result.max_error = compare_outputs(bench, m.outputs, reference.outputs, ok);
      if (!ok) {
        m.result.status = "wrong";
        m.result.error = "output differs from the reference (max error " +
                         std::to_string(m.result.max_error) + ")";
      }
    }
    write_bench_result(out, m.result);
  }
}

} // namespace kcache::compiler
