#include <kcache/compiler/bench_inputs.h>
#include <kcache/compiler/gpu_bench.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <unordered_map>

namespace kcache::compiler {
namespace {

using DevicePtr = CudaDriver::DevicePtr;

// The search as far as its inputs go: without the repeats and warm-up that
// halving changes between rounds.
std::string inputs_key(const std::string& search_json) {
  nlohmann::json doc = protocol::parse_json_or_discarded(search_json);
  if (doc.is_object() && doc.contains("benchmark") && doc["benchmark"].is_object()) {
    doc["benchmark"].erase("repeats");
    doc["benchmark"].erase("warmup");
  }
  return protocol::json_text(doc);
}

// A timed run lasts at least this long: shorter kernels are launched
// several times (up to kMaxBatch) between its events.
constexpr double kMinTimedRunUs = 100;
constexpr int kMaxBatch = 256;

// What a block gets without opting in to more (cuFuncSetAttribute).
constexpr std::int64_t kDefaultSharedBytes = std::int64_t{48} * 1024;

} // namespace

// What GpuBench::State holds (a named namespace: a class member's type may
// not come from an unnamed one).
namespace gpu_bench_detail {

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

// Loaded variants, by entry and CUBIN bytes (exact: two variants whose
// binaries are equal are the same kernel). The driver unloads them with its
// context; a search loads each of its variants once.
class ModuleCache {
public:
  struct Loaded {
    CudaDriver::Handle function = nullptr;
    CudaDriver::FunctionLimits limits;
    std::int64_t dynamic_shared_allowed = 0; // raised with allow_dynamic_shared
  };
  explicit ModuleCache(CudaDriver& gpu) : gpu_(gpu) {}
  tl::expected<Loaded*, std::string> get(const std::string& entry, const std::string& binary) {
    std::string key = entry;
    key.push_back('\0');
    key += binary;
    if (const auto it = loaded_.find(key); it != loaded_.end()) {
      return &it->second;
    }
    auto module = gpu_.load_module(binary);
    if (!module) {
      return tl::unexpected(module.error());
    }
    auto fn = gpu_.function(*module, entry);
    if (!fn) {
      return tl::unexpected(fn.error());
    }
    auto limits = gpu_.limits(*fn);
    if (!limits) {
      return tl::unexpected(limits.error());
    }
    return &loaded_.emplace(std::move(key), Loaded{*fn, *limits, 0}).first->second;
  }

private:
  CudaDriver& gpu_;
  std::unordered_map<std::string, Loaded> loaded_;
};

} // namespace gpu_bench_detail

namespace {

using gpu_bench_detail::ArgsCache;
using gpu_bench_detail::DeviceArgs;
using gpu_bench_detail::ModuleCache;

struct Measured {
  BenchResult result;
  OutputBytes outputs;
  bool context_suspect = false; // failed on the device: the context may be unusable
};

Measured measure(CudaDriver& gpu, ModuleCache& modules, ArgsCache& cache,
                 const BenchmarkSpec& bench, const std::string& entry, const BenchVariant& v,
                 bool check) {
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
  auto loaded = modules.get(entry, v.binary);
  if (!loaded) {
    return fail(loaded.error());
  }
  ModuleCache::Loaded& module = **loaded;
  const CudaDriver::Handle* fn = &module.function;
  const CudaDriver::FunctionLimits* limits = &module.limits;
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
  if (*shared > kDefaultSharedBytes && *shared > module.dynamic_shared_allowed) {
    if (auto allowed = gpu.allow_dynamic_shared(*fn, static_cast<int>(*shared)); !allowed) {
      return fail(allowed.error());
    }
    module.dynamic_shared_allowed = *shared;
  }
  auto cached = cache.get(bench, v.params);
  if (!cached) {
    return fail(cached.error());
  }
  DeviceArgs& args = **cached;
  // From here a failure is the device's (a launch that faulted): CUDA
  // errors are sticky, so the context may be unusable after it.
  auto fail_on_device = [&](std::string why) {
    m.context_suspect = true;
    return fail(std::move(why));
  };
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
      return fail_on_device(r.error());
    }
  }
  // A timed run of a short kernel is a batch of launches between one pair of
  // events: a single launch of about 10 µs is within the jitter of the events
  // and of the launch itself, enough to rank variants wrongly. The first run
  // sizes the batch (and is timed again when it was short).
  int batch = 1;
  std::vector<double> times;
  for (int i = 0; i < bench.repeats; ++i) {
    // Zeroing outputs happens before the timed region.
    auto a = args.args(i);
    if (!a) {
      return fail_on_device(a.error());
    }
    auto ms = gpu.time_ms([&]() -> tl::expected<void, std::string> {
      for (int b = 0; b < batch; ++b) {
        if (auto r = gpu.launch(*fn, static_cast<unsigned>(*grid), static_cast<unsigned>(*block),
                                static_cast<unsigned>(*shared), *a);
            !r) {
          return r;
        }
      }
      return {};
    });
    if (!ms) {
      return fail_on_device(ms.error());
    }
    const double us = *ms * 1000.0 / batch;
    if (i == 0 && batch == 1 && us < kMinTimedRunUs) {
      batch = static_cast<int>(
          std::clamp(std::ceil(kMinTimedRunUs / std::max(us, 0.5)), 2.0, double{kMaxBatch}));
      i = -1; // the first run again, as a batch
      continue;
    }
    times.push_back(us);
  }
  summarize_times(std::move(times), m.result);
  if (!check) {
    m.result.status = "ok";
    return m;
  }
  if (auto r = launch(0); !r) { // the checked run: input set 0, as the reference's
    return fail_on_device(r.error());
  }
  if (auto s = gpu.synchronize(); !s) {
    return fail_on_device(s.error());
  }
  auto outputs = args.outputs();
  if (!outputs) {
    return fail_on_device(outputs.error());
  }
  m.outputs = std::move(*outputs);
  m.result.status = "ok";
  return m;
}

} // namespace

// What a search's rounds share. The host arguments point into `search`,
// which is kept while requests differ only in their repeats and warm-up.
struct GpuBench::State {
  explicit State(CudaDriver& gpu) : modules(gpu) {}
  gpu_bench_detail::ModuleCache modules;
  std::string inputs_key; // the search less its repeats and warm-up
  std::unique_ptr<AutotuneSearch> search;
  std::unique_ptr<gpu_bench_detail::ArgsCache> args;
  std::string reference_key; // reference binary and its arguments' signature
  OutputBytes reference_outputs;
};

GpuBench::GpuBench(CudaDriver& gpu) : gpu_(gpu), state_(std::make_unique<State>(gpu)) {}
GpuBench::~GpuBench() = default;

std::vector<BenchResult> GpuBench::run(const BenchRequest& request,
                                       const std::function<void(const BenchResult&)>& emit) {
  std::vector<BenchResult> results;
  auto report = [&](BenchResult r) {
    if (emit) {
      emit(r);
    }
    results.push_back(std::move(r));
  };
  auto fail_all = [&](const std::string& why) {
    for (const BenchVariant& v : request.variants) {
      report(BenchResult{v.id, "error", 0, 0, 0, why});
    }
    return results;
  };
  auto search = parse_autotune(request.search_json);
  if (!search) {
    return fail_all(search.error());
  }
  State& st = *state_;
  const std::string key = inputs_key(search->json);
  if (!st.search || key != st.inputs_key) {
    st.args.reset(); // its host arguments point into the search it replaces
    st.reference_key.clear();
    st.reference_outputs.clear();
    st.search = std::make_unique<AutotuneSearch>(std::move(*search));
    st.inputs_key = key;
    st.args = std::make_unique<gpu_bench_detail::ArgsCache>(gpu_);
  } else {
    st.search->benchmark.repeats = search->benchmark.repeats;
    st.search->benchmark.warmup = search->benchmark.warmup;
  }
  const BenchmarkSpec& bench = st.search->benchmark;
  if (request.check) {
    auto signature = args_signature(bench, request.reference.params);
    if (!signature) {
      return fail_all("the reference variant failed: " + signature.error());
    }
    std::string reference_key = *signature;
    reference_key.push_back('\0');
    reference_key += request.reference.binary;
    if (reference_key != st.reference_key) {
      Measured reference =
          measure(gpu_, st.modules, *st.args, bench, request.entry, request.reference, true);
      if (reference.result.status != "ok") {
        context_lost_ = context_lost_ || reference.context_suspect;
        return fail_all("the reference variant failed: " + reference.result.error);
      }
      st.reference_outputs = std::move(reference.outputs);
      st.reference_key = std::move(reference_key);
    }
  }
  for (const BenchVariant& v : request.variants) {
    Measured m = measure(gpu_, st.modules, *st.args, bench, request.entry, v, request.check);
    if (m.result.status == "ok" && request.check) {
      bool ok = true;
      m.result.max_error = compare_outputs(bench, m.outputs, st.reference_outputs, ok);
      if (!ok) {
        m.result.status = "wrong";
        m.result.error = "output differs from the reference (max error " +
                         std::to_string(m.result.max_error) + ")";
      }
    }
    report(std::move(m.result));
    if (m.context_suspect) {
      context_lost_ = true;
      break;
    }
  }
  return results;
}

std::vector<BenchResult> bench_on_gpu(GpuBench& bench, const BenchRequest& request) {
  std::vector<BenchResult> results;
  BenchRequest rest = request;
  while (results.size() < request.variants.size()) {
    rest.variants.assign(request.variants.begin() + static_cast<std::ptrdiff_t>(results.size()),
                         request.variants.end());
    std::vector<BenchResult> more = bench.run(rest);
    results.insert(results.end(), more.begin(), more.end());
  }
  return results;
}

} // namespace kcache::compiler
