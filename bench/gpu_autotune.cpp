// gpu_autotune: the GPU-host half of the GPU autotune check. It benchmarks
// the variants gpu_autotune_export wrote (compiled by kcached's workers) on
// this host's GPU, exhaustively and by successive halving, through the same
// search code kcached runs (run_search + bench_on_gpu), and compares every
// correct variant and the winner with cuBLAS on the same inputs: each
// variant's max error against the reference variant and against cuBLAS, its
// time and TFLOP/s, then the winner against cuBLAS on the search's shape and
// on the --shapes given (each searched exhaustively too).
//
//   gpu_autotune DIR [--shapes MxNxK,MxNxK...]
//
// The search is a GEMM with buffers A, B (inputs) and C (output) in that
// order and scalars M, N, K. Its layout follows the input dtype, as the
// templates of bench/autotune/ have it: f32 (gemm.cu) is C = A * B with B
// K x N; bf16/f16 (gemm_tc.cu) is C = A * B^T with B N x K (nn.Linear's
// weight); all row-major. cuBLAS gets the same product through cublasGemmEx
// (FP32 compute, no TF32).
//
// Built on the GPU host from a few sources (scripts/device/gpu_autotune.sh):
// the driver API and cuBLAS are dlopen'ed.

#include <kcache/compiler/autotune_run.h>
#include <kcache/compiler/bench_inputs.h>
#include <kcache/compiler/gpu_bench.h>

#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <sstream>

namespace {

using namespace kcache::compiler;
using nlohmann::json;
namespace fs = std::filesystem;
using DevicePtr = CudaDriver::DevicePtr;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Shape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string text() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  }
};

double tflops(double us, const Shape& s) {
  return us > 0 ? 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                      static_cast<double>(s.k) / (us * 1e-6) / 1e12
                : 0;
}

struct Cublas {
  using Handle = void*;
  using Create = int (*)(Handle*);
  using Destroy = int (*)(Handle);
  using GemmEx = int (*)(Handle, int, int, int, int, int, const void*, const void*, int, int,
                         const void*, int, int, const void*, void*, int, int, int, int);
  static constexpr int kOpN = 0, kOpT = 1;
  static constexpr int kR32F = 0, kR16F = 2, kR16BF = 14; // cudaDataType
  static constexpr int kCompute32F = 68;                  // CUBLAS_COMPUTE_32F (no TF32)
  static constexpr int kAlgoDefault = -1;
  void* lib = nullptr;
  Create create = nullptr;
  Destroy destroy = nullptr;
  GemmEx gemm_ex = nullptr;
  Handle handle = nullptr;
  std::string where;

  static std::unique_ptr<Cublas> open() {
    auto c = std::make_unique<Cublas>();
    for (const char* name :
         {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
          "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so"}) {
      c->lib = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (c->lib != nullptr) {
        c->where = name;
        break;
      }
    }
    if (c->lib == nullptr) {
      return nullptr;
    }
    c->create = reinterpret_cast<Create>(::dlsym(c->lib, "cublasCreate_v2"));
    c->destroy = reinterpret_cast<Destroy>(::dlsym(c->lib, "cublasDestroy_v2"));
    c->gemm_ex = reinterpret_cast<GemmEx>(::dlsym(c->lib, "cublasGemmEx"));
    if (c->create == nullptr || c->destroy == nullptr || c->gemm_ex == nullptr ||
        c->create(&c->handle) != 0) {
      return nullptr;
    }
    return c;
  }
  ~Cublas() {
    if (handle != nullptr) {
      destroy(handle);
    }
  }
  Cublas() = default;
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
};

int cuda_type(DType d) {
  return d == DType::kBF16 ? Cublas::kR16BF : d == DType::kF16 ? Cublas::kR16F : Cublas::kR32F;
}

// Device memory freed with the holder.
class DeviceBuffers {
public:
  explicit DeviceBuffers(CudaDriver& gpu) : gpu_(gpu) {}
  ~DeviceBuffers() {
    for (DevicePtr p : owned_) {
      gpu_.free(p);
    }
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  tl::expected<DevicePtr, std::string> upload(const std::vector<std::uint8_t>& bytes) {
    auto p = gpu_.alloc(bytes.size());
    if (!p) {
      return p;
    }
    owned_.push_back(*p);
    if (auto c = gpu_.copy_to_device(*p, bytes.data(), bytes.size()); !c) {
      return tl::unexpected(c.error());
    }
    return *p;
  }

private:
  CudaDriver& gpu_;
  std::vector<DevicePtr> owned_;
};

// One shape of a GEMM search: the benchmark's own inputs on the device (every
// rotated set), cuBLAS timed and checked on them, and any variant run once on
// input set 0 and compared with cuBLAS's output.
class GemmCheck {
public:
  GemmCheck(CudaDriver& gpu, Cublas* cublas, BenchmarkSpec bench, Shape shape)
      : gpu_(gpu), cublas_(cublas), bench_(std::move(bench)), shape_(shape), buffers_(gpu) {}

  tl::expected<void, std::string> prepare(const Bindings& params) {
    auto host = make_host_args(bench_, params);
    if (!host) {
      return tl::unexpected(host.error());
    }
    host_ = std::move(*host);
    scalars_.assign(host_.size(), ScalarSlot{});
    device_.assign(host_.size(), {});
    for (std::size_t i = 0; i < host_.size(); ++i) {
      const HostArg& a = host_[i];
      if (a.spec->kind == BenchArg::Kind::kScalar) {
        scalars_[i].set(a.value);
        continue;
      }
      (a.spec->output ? outputs_ : inputs_).push_back(i);
      for (const auto& set : a.sets) {
        auto p = buffers_.upload(set);
        if (!p) {
          return tl::unexpected(p.error());
        }
        device_[i].push_back(*p);
      }
    }
    if (inputs_.size() != 2 || outputs_.size() != 1) {
      return tl::unexpected(std::string("not a GEMM: buffers A, B (inputs) and C (output)"));
    }
    // The variants' output gets a buffer of its own; cuBLAS writes device_[C].
    auto c = buffers_.upload(host_[outputs_[0]].sets.front());
    if (!c) {
      return tl::unexpected(c.error());
    }
    variant_out_ = *c;
    return {};
  }

  DType input_dtype() const { return host_[inputs_[0]].spec->dtype; }
  DType output_dtype() const { return host_[outputs_[0]].spec->dtype; }
  // f32: B is K x N (C = A B); 16-bit: B is N x K (C = A B^T).
  bool b_is_n_by_k() const { return input_dtype() != DType::kF32; }

  // Median time of cuBLAS over the benchmark's repeats (input sets rotating
  // as for the variants); its output of input set 0 is kept.
  tl::expected<double, std::string> time_cublas() {
    const int m = static_cast<int>(shape_.m), n = static_cast<int>(shape_.n),
              k = static_cast<int>(shape_.k);
    const int in = cuda_type(input_dtype()), out = cuda_type(output_dtype());
    const float alpha = 1.f, beta = 0.f;
    const std::size_t a = inputs_[0], b = inputs_[1], c = outputs_[0];
    auto run = [&](int set) -> tl::expected<void, std::string> {
      // cuBLAS takes device addresses as pointers; the driver API hands out integers.
      // NOLINTBEGIN(performance-no-int-to-ptr)
      auto* pa = reinterpret_cast<const void*>(device_[a][set % device_[a].size()]);
      auto* pb = reinterpret_cast<const void*>(device_[b][set % device_[b].size()]);
      auto* pc = reinterpret_cast<void*>(device_[c][0]);
      // NOLINTEND(performance-no-int-to-ptr)
      // Row-major C = A op(B) is column-major C^T = op(B)^T A^T.
      const int status = b_is_n_by_k()
                             ? cublas_->gemm_ex(cublas_->handle, Cublas::kOpT, Cublas::kOpN, n, m,
                                                k, &alpha, pb, in, k, pa, in, k, &beta, pc, out, n,
                                                Cublas::kCompute32F, Cublas::kAlgoDefault)
                             : cublas_->gemm_ex(cublas_->handle, Cublas::kOpN, Cublas::kOpN, n, m,
                                                k, &alpha, pb, in, n, pa, in, k, &beta, pc, out, n,
                                                Cublas::kCompute32F, Cublas::kAlgoDefault);
      if (status != 0) {
        return tl::unexpected("cublasGemmEx status " + std::to_string(status));
      }
      return {};
    };
    for (int i = 0; i < std::max(bench_.warmup, 2); ++i) {
      if (auto r = run(i); !r) {
        return tl::unexpected(r.error());
      }
    }
    std::vector<double> times;
    for (int i = 0; i < bench_.repeats; ++i) {
      auto ms = gpu_.time_ms([&] { return run(i); });
      if (!ms) {
        return tl::unexpected(ms.error());
      }
      times.push_back(*ms * 1000);
    }
    if (auto r = run(0); !r) {
      return tl::unexpected(r.error());
    }
    std::vector<std::uint8_t> bytes(host_[c].sets.front().size());
    if (auto r = gpu_.copy_to_host(bytes.data(), device_[c][0], bytes.size()); !r) {
      return tl::unexpected(r.error());
    }
    cublas_out_ = {std::move(bytes)};
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  // cuBLAS's output on 64 sampled elements against a double-precision dot
  // product of the (decoded) inputs: the largest error relative to 1 + |want|.
  double check_cublas_samples() const {
    const HostArg& a = host_[inputs_[0]];
    const HostArg& b = host_[inputs_[1]];
    std::mt19937_64 rng(7);
    double worst = 0;
    for (int s = 0; s < 64; ++s) {
      const auto i = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(shape_.m));
      const auto j = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(shape_.n));
      const auto n = static_cast<std::size_t>(shape_.n), k = static_cast<std::size_t>(shape_.k);
      double want = 0;
      for (std::size_t kk = 0; kk < k; ++kk) {
        want += element_value(a.spec->dtype, a.sets[0], i * k + kk) *
                element_value(b.spec->dtype, b.sets[0], b_is_n_by_k() ? j * k + kk : kk * n + j);
      }
      const double got = element_value(output_dtype(), cublas_out_[0], i * n + j);
      worst = std::max(worst, std::fabs(got - want) / (1 + std::fabs(want)));
    }
    return worst;
  }

  // The variant run once on input set 0; its max error against cuBLAS's
  // output (the benchmark's tolerance decides `ok`).
  tl::expected<double, std::string> error_vs_cublas(const Bindings& params,
                                                    const std::string& binary,
                                                    const std::string& entry, bool& ok) {
    const Bindings scope = bench_scope(bench_, params);
    auto grid = bench_.launch.grid->evaluate(scope);
    auto block = bench_.launch.block->evaluate(scope);
    auto shared = bench_.launch.shared_bytes ? bench_.launch.shared_bytes->evaluate(scope)
                                             : tl::expected<std::int64_t, std::string>(0);
    if (!grid || !block || !shared) {
      return tl::unexpected(std::string("launch geometry does not evaluate"));
    }
    auto module = gpu_.load_module(binary);
    if (!module) {
      return tl::unexpected(module.error());
    }
    auto fn = gpu_.function(*module, entry);
    if (!fn) {
      return tl::unexpected(fn.error());
    }
    if (*shared > std::int64_t{48} * 1024) { // over the default: opt in, as bench_on_gpu does
      if (auto r = gpu_.allow_dynamic_shared(*fn, static_cast<int>(*shared)); !r) {
        return tl::unexpected(r.error());
      }
    }
    std::vector<DevicePtr> pointers(host_.size(), 0);
    std::vector<void*> args;
    for (std::size_t i = 0; i < host_.size(); ++i) {
      if (host_[i].spec->kind == BenchArg::Kind::kScalar) {
        args.push_back(scalars_[i].address(host_[i].spec->dtype));
        continue;
      }
      pointers[i] = host_[i].spec->output ? variant_out_ : device_[i][0];
      args.push_back(&pointers[i]);
    }
    const std::size_t out_bytes = host_[outputs_[0]].sets.front().size();
    if (auto z = gpu_.zero(variant_out_, out_bytes); !z) {
      return tl::unexpected(z.error());
    }
    if (auto r = gpu_.launch(*fn, static_cast<unsigned>(*grid), static_cast<unsigned>(*block),
                             static_cast<unsigned>(*shared), std::move(args));
        !r) {
      return tl::unexpected(r.error());
    }
    if (auto r = gpu_.synchronize(); !r) {
      return tl::unexpected(r.error());
    }
    OutputBytes got{std::vector<std::uint8_t>(out_bytes)};
    if (auto r = gpu_.copy_to_host(got[0].data(), variant_out_, out_bytes); !r) {
      return tl::unexpected(r.error());
    }
    ok = true;
    return compare_outputs(bench_, got, cublas_out_, ok);
  }

private:
  CudaDriver& gpu_;
  Cublas* cublas_;
  BenchmarkSpec bench_;
  Shape shape_;
  DeviceBuffers buffers_;
  std::vector<HostArg> host_;
  std::vector<ScalarSlot> scalars_;
  std::vector<std::vector<DevicePtr>> device_;
  std::vector<std::size_t> inputs_, outputs_;
  DevicePtr variant_out_ = 0;
  OutputBytes cublas_out_;
};

struct Summary {
  std::string winner;
  double best_us = 0, worst_us = 0, seconds = 0;
  std::map<std::string, int> statuses;
  std::size_t timed_runs = 0;
};

Summary summarize(const TuningTable& table) {
  Summary s;
  s.winner = table.winner.value_or("none");
  s.seconds = table.bench_seconds;
  s.timed_runs = table.timed_runs;
  for (const TuningRow& row : table.rows) {
    ++s.statuses[row.status];
    if (row.status == "ok" || row.status == "eliminated") {
      s.worst_us = std::max(s.worst_us, row.median_us);
    }
    if (table.winner && row.id == *table.winner) {
      s.best_us = row.median_us;
    }
  }
  return s;
}

std::vector<Shape> parse_shapes(const std::string& list) {
  std::vector<Shape> shapes;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    Shape s;
    char x1 = 0, x2 = 0;
    std::stringstream one(item);
    if (one >> s.m >> x1 >> s.n >> x2 >> s.k && x1 == 'x' && x2 == 'x' && s.m > 0 && s.n > 0 &&
        s.k > 0) {
      shapes.push_back(s);
    } else {
      std::fprintf(stderr, "ignoring shape '%s' (want MxNxK)\n", item.c_str());
    }
  }
  return shapes;
}

class Runner {
public:
  Runner(CudaDriver& gpu, const json& manifest, const fs::path& dir)
      : gpu_(gpu), manifest_(manifest), entry_(manifest["entry"]) {
    for (const json& v : manifest["variants"]) {
      compiled_.push_back(load(v, dir));
    }
    reference_ = load(manifest["reference"], dir);
  }
  const CompiledVariant& reference() const { return reference_; }
  std::size_t size() const { return compiled_.size(); }

  // The search over `shape` with `strategy`; nullopt if the spec is unusable.
  std::optional<TuningTable> search(const Shape& shape, const char* strategy) {
    json search_json = manifest_["search"];
    search_json["strategy"] = {{"kind", strategy}};
    search_json["benchmark"]["shapes"] = {{"M", shape.m}, {"N", shape.n}, {"K", shape.k}};
    auto search = parse_autotune(search_json.dump());
    if (!search) {
      std::fprintf(stderr, "%s\n", search.error().c_str());
      return std::nullopt;
    }
    auto space = expand(*search);
    if (!space) {
      std::fprintf(stderr, "%s\n", space.error().c_str());
      return std::nullopt;
    }
    std::printf("searching %s: %s over %zu variants (%zu pruned)...\n", shape.text().c_str(),
                strategy, space->variants.size(), space->pruned.size());
    std::fflush(stdout);
    BenchRequest base;
    base.search_json = search->json;
    base.device = "cuda";
    base.entry = entry_;
    base.reference = {"reference", reference_.variant.params, *reference_.binary};
    bench_ = search->benchmark;
    GpuBench session(gpu_); // the search's rounds share modules, inputs and the reference's outputs
    return run_search(*search, *space, compiled_, base,
                      [&](const BenchRequest& request, BenchPhase /*no deadline here*/) {
                        return bench_on_gpu(session, request);
                      });
  }
  const BenchmarkSpec& last_bench() const { return bench_; }

  const std::string* binary(const std::string& id) const {
    for (const CompiledVariant& c : compiled_) {
      if (c.variant.id == id && c.binary) {
        return &*c.binary;
      }
    }
    return nullptr;
  }
  const Bindings* params(const std::string& id) const {
    for (const CompiledVariant& c : compiled_) {
      if (c.variant.id == id) {
        return &c.variant.params;
      }
    }
    return nullptr;
  }
  const std::string& entry() const { return entry_; }

private:
  static CompiledVariant load(const json& v, const fs::path& dir) {
    CompiledVariant c;
    c.variant.id = v["id"];
    for (const auto& [name, value] : v["params"].items()) {
      c.variant.params[name] = value.get<std::int64_t>();
    }
    if (v.contains("file")) {
      c.binary = read_file(dir / v["file"].get<std::string>());
    } else {
      c.error = v.value("error", "not compiled");
    }
    return c;
  }

  CudaDriver& gpu_;
  const json& manifest_;
  std::string entry_;
  std::vector<CompiledVariant> compiled_;
  CompiledVariant reference_;
  BenchmarkSpec bench_;
};

const TuningRow* row_of(const TuningTable& table, const std::string& id) {
  for (const TuningRow& row : table.rows) {
    if (row.id == id) {
      return &row;
    }
  }
  return nullptr;
}

std::string error_text(const tl::expected<double, std::string>& e, bool ok) {
  if (!e) {
    return "error: " + e.error();
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g%s", *e, ok ? "" : " WRONG");
  return buf;
}

// Every variant of the exhaustive table: status, time, TFLOP/s, max error vs
// the reference variant and vs cuBLAS (variants that ran), fastest first.
void print_variants(const TuningTable& table, Runner& runner, GemmCheck* check,
                    const Shape& shape) {
  std::vector<const TuningRow*> rows;
  for (const TuningRow& row : table.rows) {
    rows.push_back(&row);
  }
  auto rank = [](const TuningRow* r) { return r->status == "ok" ? 0 : r->median_us > 0 ? 1 : 2; };
  std::stable_sort(rows.begin(), rows.end(), [&](const TuningRow* a, const TuningRow* b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a->median_us < b->median_us;
  });
  std::printf("\nevery variant, %s (exhaustive; errors are max |got - want|, the check is "
              "tolerance x (1 + |want|)):\n\n| variant | status | median | TFLOP/s | vs "
              "reference | vs cuBLAS |\n|---|---|---|---|---|---|\n",
              shape.text().c_str());
  int wrong_vs_cublas = 0;
  for (const TuningRow* r : rows) {
    if (r->status == "pruned") {
      continue; // listed by count below
    }
    std::string vs_cublas = "-";
    const std::string* binary = runner.binary(r->id);
    if (check != nullptr && binary != nullptr && (r->status == "ok" || r->status == "wrong")) {
      bool ok = true;
      auto e = check->error_vs_cublas(r->params, *binary, runner.entry(), ok);
      vs_cublas = error_text(e, ok);
      wrong_vs_cublas += e && !ok ? 1 : 0;
    }
    std::printf("| %s | %s | %.1f us | %.1f | %s | %s |\n", r->id.c_str(), r->status.c_str(),
                r->median_us, tflops(r->median_us, shape),
                r->status == "ok" || r->status == "wrong" ? error_text(r->max_error, true).c_str()
                                                          : r->error.substr(0, 80).c_str(),
                vs_cublas.c_str());
  }
  std::printf("variants outside cuBLAS's tolerance: %d\n", wrong_vs_cublas);
}

int run_dir(CudaDriver& gpu, Cublas* cublas, const fs::path& dir,
            const std::vector<Shape>& extra_shapes) {
  const json manifest = json::parse(read_file(dir / "manifest.json"), nullptr, false);
  if (!manifest.is_object()) {
    std::fprintf(stderr, "no manifest.json in %s\n", dir.c_str());
    return 2;
  }
  Runner runner(gpu, manifest, dir);
  if (!runner.reference().binary) {
    std::fprintf(stderr, "the reference did not compile: %s\n", runner.reference().error.c_str());
    return 1;
  }
  const json& shapes = manifest["search"]["benchmark"]["shapes"];
  const Shape primary{shapes.at("M").get<std::int64_t>(), shapes.at("N").get<std::int64_t>(),
                      shapes.at("K").get<std::int64_t>()};
  std::printf("\n## %s (%s): %zu variants compiled by kcached in %.1f s\n", dir.c_str(),
              runner.entry().c_str(), runner.size(), manifest.value("compile_seconds", 0.0));

  std::map<std::string, Summary> summaries;
  std::optional<TuningTable> exhaustive;
  for (const char* strategy : {"exhaustive", "halving"}) {
    auto table = runner.search(primary, strategy);
    if (!table) {
      return 2;
    }
    summaries[strategy] = summarize(*table);
    if (std::string(strategy) == "exhaustive") {
      exhaustive = std::move(table);
    }
  }
  const BenchmarkSpec bench = runner.last_bench();
  std::unique_ptr<GemmCheck> check;
  double cublas_us = 0;
  if (cublas != nullptr) {
    check = std::make_unique<GemmCheck>(gpu, cublas, bench, primary);
    auto prepared = check->prepare(runner.reference().variant.params);
    auto us = prepared ? check->time_cublas() : tl::unexpected(prepared.error());
    if (us) {
      cublas_us = *us;
    } else {
      std::printf("cuBLAS: %s: no comparison\n", us.error().c_str());
      check.reset();
    }
  } else {
    std::printf("cuBLAS: not found on this host (tried libcublas.so.13/.12): no comparison\n");
  }
  print_variants(*exhaustive, runner, check.get(), primary);

  std::printf("\n| strategy | winner | best | worst correct | search (bench) time | timed runs | "
              "statuses |\n|---|---|---|---|---|---|---|\n");
  for (const auto& [strategy, s] : summaries) {
    std::string statuses;
    for (const auto& [status, count] : s.statuses) {
      statuses += (statuses.empty() ? "" : ", ") + status + " " + std::to_string(count);
    }
    std::printf("| %s | %s | %.1f us | %.1f us | %.1f s | %zu | %s |\n", strategy.c_str(),
                s.winner.c_str(), s.best_us, s.worst_us, s.seconds, s.timed_runs, statuses.c_str());
  }
  const Summary& ex = summaries["exhaustive"];
  const Summary& hv = summaries["halving"];
  std::printf("halving vs exhaustive: search time %.2fx, winner time %.2fx\n",
              ex.seconds > 0 ? hv.seconds / ex.seconds : 0.0,
              ex.best_us > 0 ? hv.best_us / ex.best_us : 0.0);
  if (ex.winner == "none") {
    return 1;
  }

  // The winner against cuBLAS: the search's shape, then each extra shape
  // (searched exhaustively: its own winner, and how the first winner fares).
  struct Line {
    Shape shape;
    std::string winner;
    double winner_us = 0, first_us = 0, cublas_us = 0, cublas_sample_error = 0;
    std::string winner_vs_cublas;
  };
  std::vector<Line> lines;
  auto versus = [&](GemmCheck& c, const std::string& id) {
    const std::string* binary = runner.binary(id);
    const Bindings* params = runner.params(id);
    if (binary == nullptr || params == nullptr) {
      return std::string("-");
    }
    bool ok = true;
    return error_text(c.error_vs_cublas(*params, *binary, runner.entry(), ok), ok);
  };
  if (check) {
    lines.push_back({primary, ex.winner, ex.best_us, ex.best_us, cublas_us,
                     check->check_cublas_samples(), versus(*check, ex.winner)});
  }
  for (const Shape& shape : extra_shapes) {
    auto table = runner.search(shape, "exhaustive");
    if (!table || !table->winner) {
      std::printf("%s: no correct variant\n", shape.text().c_str());
      continue;
    }
    const Summary s = summarize(*table);
    const TuningRow* first = row_of(*table, ex.winner);
    Line line{shape, s.winner, s.best_us, first != nullptr ? first->median_us : 0, 0, 0, "-"};
    if (cublas != nullptr) {
      GemmCheck c(gpu, cublas, runner.last_bench(), shape);
      auto prepared = c.prepare(runner.reference().variant.params);
      auto us = prepared ? c.time_cublas() : tl::unexpected(prepared.error());
      if (us) {
        line.cublas_us = *us;
        line.cublas_sample_error = c.check_cublas_samples();
        line.winner_vs_cublas = versus(c, s.winner);
      } else {
        std::printf("cuBLAS on %s: %s\n", shape.text().c_str(), us.error().c_str());
      }
    }
    lines.push_back(line);
  }
  std::printf("\n| shape (MxNxK) | winner | winner time | TFLOP/s | cuBLAS (%s) | TFLOP/s | "
              "winner / cuBLAS throughput | first winner's time there | winner vs cuBLAS max "
              "error | cuBLAS vs fp64 (64 samples, rel.) |\n|---|---|---|---|---|---|---|---|---|"
              "---|\n",
              cublas != nullptr ? cublas->where.c_str() : "none");
  for (const Line& l : lines) {
    std::printf("| %s | %s | %.1f us | %.1f | %.1f us | %.1f | %.2fx | %.1f us | %s | %.1e |\n",
                l.shape.text().c_str(), l.winner.c_str(), l.winner_us, tflops(l.winner_us, l.shape),
                l.cublas_us, tflops(l.cublas_us, l.shape),
                l.winner_us > 0 ? l.cublas_us / l.winner_us : 0.0, l.first_us,
                l.winner_vs_cublas.c_str(), l.cublas_sample_error);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_autotune DIR [--shapes MxNxK,...]\n");
    return 2;
  }
  std::vector<Shape> extra_shapes;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--shapes") {
      extra_shapes = parse_shapes(argv[i + 1]);
    }
  }
  auto gpu = CudaDriver::open();
  if (!gpu) {
    std::fprintf(stderr, "no GPU: %s\n", gpu.error().c_str());
    return 3;
  }
  std::printf("GPU: %s (cc %d.%d)\n", (*gpu)->device().name.c_str(), (*gpu)->device().cc_major,
              (*gpu)->device().cc_minor);
  std::unique_ptr<Cublas> cublas = Cublas::open();
  return run_dir(**gpu, cublas.get(), argv[1], extra_shapes);
}
