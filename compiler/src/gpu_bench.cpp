#include <kcache/compiler/bench_inputs.h>
#include <kcache/compiler/gpu_bench.h>

#include <algorithm>
#include <memory>

namespace kcache::compiler {
namespace {

using DevicePtr = CudaDriver::DevicePtr;

// What a block gets without opting in to more (cuFuncSetAttribute).
constexpr std::int64_t kDefaultSharedBytes = std::int64_t{48} * 1024;

// A variant's arguments on the device; freed with it.
class DeviceArgs {
public:
  explicit DeviceArgs(CudaDriver& gpu) : gpu_(gpu) {}
  ~DeviceArgs() {
    for (DevicePtr p : owned_) {
      gpu_.free(p);
    }
  }
  DeviceArgs(const DeviceArgs&) = delete;
  DeviceArgs& operator=(const DeviceArgs&) = delete;

  tl::expected<void, std::string> upload(std::vector<HostArg> host) {
    host_ = std::move(host);
    sets_.assign(host_.size(), {});
    scalars_.assign(host_.size(), ScalarSlot{});
    for (std::size_t i = 0; i < host_.size(); ++i) {
      const HostArg& a = host_[i];
      if (a.spec->kind == BenchArg::Kind::kScalar) {
        scalars_[i].set(a.value);
        continue;
      }
      for (const auto& bytes : a.sets) {
        auto ptr = gpu_.alloc(bytes.size());
        if (!ptr) {
          return tl::unexpected(ptr.error());
        }
        owned_.push_back(*ptr);
        sets_[i].push_back(*ptr);
        if (auto copied = gpu_.copy_to_device(*ptr, bytes.data(), bytes.size()); !copied) {
          return copied;
        }
      }
    }
    pointers_.assign(host_.size(), 0);
    return {};
  }

  // cuLaunchKernel's argument array for input set `set` (outputs zeroed).
  tl::expected<std::vector<void*>, std::string> args(int set) {
    std::vector<void*> out;
    for (std::size_t i = 0; i < host_.size(); ++i) {
      const HostArg& a = host_[i];
      if (a.spec->kind == BenchArg::Kind::kBuffer) {
        pointers_[i] = sets_[i][static_cast<std::size_t>(set) % sets_[i].size()];
        if (a.spec->output) {
          if (auto z = gpu_.zero(pointers_[i], a.sets.front().size()); !z) {
            return tl::unexpected(z.error());
          }
        }
        out.push_back(&pointers_[i]);
      } else {
        out.push_back(scalars_[i].address(a.spec->dtype));
      }
    }
    return out;
  }

  tl::expected<OutputBytes, std::string> outputs() {
    OutputBytes out;
    for (std::size_t i = 0; i < host_.size(); ++i) {
      const HostArg& a = host_[i];
      if (a.spec->kind == BenchArg::Kind::kBuffer && a.spec->output) {
        std::vector<std::uint8_t> bytes(a.sets.front().size());
        if (auto c = gpu_.copy_to_host(bytes.data(), sets_[i].front(), bytes.size()); !c) {
          return tl::unexpected(c.error());
        }
        out.push_back(std::move(bytes));
      }
    }
    return out;
  }

private:
  CudaDriver& gpu_;
  std::vector<HostArg> host_;
  std::vector<std::vector<DevicePtr>> sets_;
  std::vector<ScalarSlot> scalars_;
  std::vector<DevicePtr> pointers_;
  std::vector<DevicePtr> owned_;
};

// The arguments on the device, kept while variants share a signature: a
// search over tile sizes generates and uploads its inputs once.
class ArgsCache {
public:
  explicit ArgsCache(CudaDriver& gpu) : gpu_(gpu) {}
  tl::expected<DeviceArgs*, std::string> get(const BenchmarkSpec& bench, const Bindings& params) {
    auto signature = args_signature(bench, params);
    if (!signature) {
      return tl::unexpected(signature.error());
    }
    if (args_ && *signature == signature_) {
      return args_.get();
    }
    args_.reset(); // free the previous buffers first
    auto host = make_host_args(bench, params);
    if (!host) {
      return tl::unexpected(host.error());
    }
    auto fresh = std::make_unique<DeviceArgs>(gpu_);
    if (auto up = fresh->upload(std::move(*host)); !up) {
      return tl::unexpected(up.error());
    }
    args_ = std::move(fresh);
    signature_ = *signature;
    return args_.get();
  }

private:
  CudaDriver& gpu_;
  std::string signature_;
  std::unique_ptr<DeviceArgs> args_;
};

struct Measured {
  BenchResult result;
  OutputBytes outputs;
};

Measured measure(CudaDriver& gpu, ArgsCache& cache, const BenchmarkSpec& bench,
                 const std::string& entry, const BenchVariant& v, bool check) {
  Measured m;
  m.result.id = v.id;
  m.result.status = "error";
  auto fail = [&](std::string why) {
    m.result.error = std::move(why);
    return m;
  };
  const Bindings scope = bench_scope(bench, v.params);
  if (!bench.launch.grid || !bench.launch.block) {
    return fail("a GPU benchmark needs launch.grid and launch.block");
  }
  auto grid = bench.launch.grid->evaluate(scope);
  auto block = bench.launch.block->evaluate(scope);
  auto shared = bench.launch.shared_bytes ? bench.launch.shared_bytes->evaluate(scope)
                                          : tl::expected<std::int64_t, std::string>(0);
  if (!grid || !block || !shared) {
    return fail(!grid ? grid.error() : !block ? block.error() : shared.error());
  }
  if (*grid <= 0 || *block <= 0 || *shared < 0 || *grid > INT32_MAX) {
    return fail("launch geometry out of range: grid " + std::to_string(*grid) + ", block " +
                std::to_string(*block));
  }
  auto module = gpu.load_module(v.binary);
  if (!module) {
    return fail(module.error());
  }
  auto fn = gpu.function(*module, entry);
  if (!fn) {
    return fail(fn.error());
  }
  auto limits = gpu.limits(*fn);
  if (!limits) {
    return fail(limits.error());
  }
  // Dropped before it runs: more threads than its registers allow, or more
  // shared memory than a block may have.
  if (*block > limits->max_threads_per_block ||
      limits->static_shared_bytes + *shared > limits->device_max_shared_per_block) {
    m.result.status = "over-limits";
    m.result.error =
        std::to_string(*block) + " threads (kernel allows " +
        std::to_string(limits->max_threads_per_block) + " at " + std::to_string(limits->registers) +
        " registers), " + std::to_string(limits->static_shared_bytes + *shared) +
        " B shared (device allows " + std::to_string(limits->device_max_shared_per_block) + ")";
    return m;
  }
  if (*shared > kDefaultSharedBytes) {
    if (auto allowed = gpu.allow_dynamic_shared(*fn, static_cast<int>(*shared)); !allowed) {
      return fail(allowed.error());
    }
  }
  auto cached = cache.get(bench, v.params);
  if (!cached) {
    return fail(cached.error());
  }
  DeviceArgs& args = **cached;
  auto launch = [&](int set) -> tl::expected<void, std::string> {
    auto a = args.args(set);
    if (!a) {
      return tl::unexpected(a.error());
    }
    return gpu.launch(*fn, static_cast<unsigned>(*grid), static_cast<unsigned>(*block),
                      static_cast<unsigned>(*shared), std::move(*a));
  };
  for (int i = 0; i < bench.warmup; ++i) {
    if (auto r = launch(i); !r) {
      return fail(r.error());
    }
  }
  std::vector<double> times;
  for (int i = 0; i < bench.repeats; ++i) {
    // Zeroing outputs happens before the timed region.
    auto a = args.args(i);
    if (!a) {
      return fail(a.error());
    }
    auto ms = gpu.time_ms([&] {
      return gpu.launch(*fn, static_cast<unsigned>(*grid), static_cast<unsigned>(*block),
                        static_cast<unsigned>(*shared), *a);
    });
    if (!ms) {
      return fail(ms.error());
    }
    times.push_back(*ms * 1000.0);
  }
  summarize_times(std::move(times), m.result);
  if (!check) {
    m.result.status = "ok";
    return m;
  }
  if (auto r = launch(0); !r) { // the checked run: input set 0, as the reference's
    return fail(r.error());
  }
  if (auto s = gpu.synchronize(); !s) {
    return fail(s.error());
  }
  auto outputs = args.outputs();
  if (!outputs) {
    return fail(outputs.error());
  }
  m.outputs = std::move(*outputs);
  m.result.status = "ok";
  return m;
}

} // namespace

std::vector<BenchResult> bench_on_gpu(CudaDriver& gpu, const BenchRequest& request) {
  std::vector<BenchResult> results;
  auto fail_all = [&](const std::string& why) {
    for (const BenchVariant& v : request.variants) {
      results.push_back(BenchResult{v.id, "error", 0, 0, 0, why});
    }
    return results;
  };
  auto search = parse_autotune(request.search_json);
  if (!search) {
    return fail_all(search.error());
  }
  const BenchmarkSpec& bench = search->benchmark;
  ArgsCache cache(gpu);
  const Measured reference =
      request.check ? measure(gpu, cache, bench, request.entry, request.reference, true)
                    : Measured{BenchResult{"reference", "ok", 0, 0, 0, ""}, {}};
  if (reference.result.status != "ok") {
    return fail_all("the reference variant failed: " + reference.result.error);
  }
  for (const BenchVariant& v : request.variants) {
    Measured m = measure(gpu, cache, bench, request.entry, v, request.check);
    if (m.result.status == "ok" && request.check) {
      bool ok = true;
      m.result.max_error = compare_outputs(bench, m.outputs, reference.outputs, ok);
      if (!ok) {
        m.result.status = "wrong";
        m.result.error = "output differs from the reference (max error " +
                         std::to_string(m.result.max_error) + ")";
      }
    }
    results.push_back(std::move(m.result));
  }
  return results;
}

void run_gpu_bench(const BenchRequest& request, std::FILE* out) {
  std::vector<BenchResult> results;
  if (auto gpu = CudaDriver::open()) {
    results = bench_on_gpu(**gpu, request);
  } else {
    for (const BenchVariant& v : request.variants) {
      results.push_back(BenchResult{v.id, "error", 0, 0, 0, gpu.error()});
    }
  }
  for (const BenchResult& r : results) {
    const std::string line = encode_bench_result(r) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
  }
  std::fflush(out);
}

} // namespace kcache::compiler
