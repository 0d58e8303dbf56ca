// gpu_autotune: the GPU-host half of the GPU autotune check. It benchmarks
// the variants gpu_autotune_export wrote (compiled by kcached's workers) on
// this host's GPU, exhaustively and by successive halving, through the same
// search code kcached runs (run_search + bench_on_gpu), and compares the
// winner with cuBLAS SGEMM on the same shape.
//
//   gpu_autotune DIR
//
// Built on the GPU host from a few sources (scripts/device/gpu_autotune.sh):
// the driver API and cuBLAS are dlopen'ed.

#include <kcache/compiler/autotune_run.h>
#include <kcache/compiler/gpu_bench.h>

#include <dlfcn.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>

namespace {

using namespace kcache::compiler;
using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double tflops(double us, std::int64_t m, std::int64_t n, std::int64_t k) {
  return us > 0 ? 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
                      (us * 1e-6) / 1e12
                : 0;
}

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

struct Cublas {
  using Handle = void*;
  using Create = int (*)(Handle*);
  using Destroy = int (*)(Handle);
  using Sgemm = int (*)(Handle, int, int, int, int, int, const float*, const float*, int,
                        const float*, int, const float*, float*, int);
  void* lib = nullptr;
  Create create = nullptr;
  Destroy destroy = nullptr;
  Sgemm sgemm = nullptr;

  static Cublas open(std::string& where) {
    Cublas c;
    for (const char* name :
         {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
          "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so"}) {
      c.lib = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (c.lib != nullptr) {
        where = name;
        break;
      }
    }
    if (c.lib != nullptr) {
      c.create = reinterpret_cast<Create>(::dlsym(c.lib, "cublasCreate_v2"));
      c.destroy = reinterpret_cast<Destroy>(::dlsym(c.lib, "cublasDestroy_v2"));
      c.sgemm = reinterpret_cast<Sgemm>(::dlsym(c.lib, "cublasSgemm_v2"));
    }
    return c;
  }
  bool ok() const { return create != nullptr && destroy != nullptr && sgemm != nullptr; }
};

// cuBLAS SGEMM on the same row-major problem (as C^T = B^T A^T in column
// major), timed like the variants; a sample of C is checked on the host.
void compare_with_cublas(CudaDriver& gpu, int m, int n, int k, int repeats, double winner_us) {
  std::string where;
  Cublas cublas = Cublas::open(where);
  if (!cublas.ok()) {
    std::printf("cuBLAS: not found on this host (tried libcublas.so.13/.12): no comparison\n");
    return;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n);
  for (float& v : a) {
    v = dist(rng);
  }
  for (float& v : b) {
    v = dist(rng);
  }
  auto da = gpu.alloc(a.size() * 4), db = gpu.alloc(b.size() * 4),
       dc = gpu.alloc(static_cast<std::size_t>(m) * n * 4);
  if (!da || !db || !dc) {
    std::printf("cuBLAS: cannot allocate\n");
    return;
  }
  (void)gpu.copy_to_device(*da, a.data(), a.size() * 4);
  (void)gpu.copy_to_device(*db, b.data(), b.size() * 4);
  Cublas::Handle handle = nullptr;
  cublas.create(&handle);
  const float alpha = 1.f, beta = 0.f;
  // cuBLAS takes device addresses as pointers; the driver API hands out integers.
  auto* pa = reinterpret_cast<const float*>(*da); // NOLINT(performance-no-int-to-ptr)
  auto* pb = reinterpret_cast<const float*>(*db); // NOLINT(performance-no-int-to-ptr)
  auto* pc = reinterpret_cast<float*>(*dc);       // NOLINT(performance-no-int-to-ptr)
  auto run = [&]() -> tl::expected<void, std::string> {
    const int status = cublas.sgemm(handle, 0, 0, n, m, k, &alpha, pb, n, pa, k, &beta, pc, n);
    if (status != 0) {
      return tl::unexpected("cublasSgemm status " + std::to_string(status));
    }
    return {};
  };
  for (int i = 0; i < 2; ++i) {
    (void)run();
  }
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto ms = gpu.time_ms(run);
    if (!ms) {
      std::printf("cuBLAS: %s\n", ms.error().c_str());
      return;
    }
    times.push_back(*ms * 1000);
  }
  std::sort(times.begin(), times.end());
  const double cublas_us = times[times.size() / 2];
  std::vector<float> c(static_cast<std::size_t>(m) * n);
  (void)gpu.copy_to_host(c.data(), *dc, c.size() * 4);
  double worst = 0;
  for (int s = 0; s < 64; ++s) {
    const int i = static_cast<int>(rng() % static_cast<unsigned>(m));
    const int j = static_cast<int>(rng() % static_cast<unsigned>(n));
    double want = 0;
    for (int kk = 0; kk < k; ++kk) {
      want += static_cast<double>(a[static_cast<std::size_t>(i) * k + kk]) *
              b[static_cast<std::size_t>(kk) * n + j];
    }
    worst = std::max(worst, std::fabs(want - c[static_cast<std::size_t>(i) * n + j]));
  }
  cublas.destroy(handle);
  gpu.free(*da);
  gpu.free(*db);
  gpu.free(*dc);
  std::printf("\n| | median | TFLOP/s |\n|---|---|---|\n");
  std::printf("| cuBLAS SGEMM (%s, FP32) | %.1f us | %.1f |\n", where.c_str(), cublas_us,
              tflops(cublas_us, m, n, k));
  std::printf("| kcache autotune winner | %.1f us | %.1f |\n", winner_us,
              tflops(winner_us, m, n, k));
  std::printf("winner / cuBLAS time: %.2fx (cuBLAS result checked on 64 samples, max |error| "
              "%.1e)\n",
              winner_us / cublas_us, worst);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpu_autotune DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  const json manifest = json::parse(read_file(dir / "manifest.json"), nullptr, false);
  if (!manifest.is_object()) {
    std::fprintf(stderr, "no manifest.json in %s\n", argv[1]);
    return 2;
  }
  auto gpu = CudaDriver::open();
  if (!gpu) {
    std::fprintf(stderr, "no GPU: %s\n", gpu.error().c_str());
    return 3;
  }
  const std::string entry = manifest["entry"];
  auto load = [&](const json& v) {
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
  };
  std::vector<CompiledVariant> compiled;
  for (const json& v : manifest["variants"]) {
    compiled.push_back(load(v));
  }
  const CompiledVariant reference = load(manifest["reference"]);
  if (!reference.binary) {
    std::fprintf(stderr, "the reference did not compile: %s\n", reference.error.c_str());
    return 1;
  }
  std::printf("GPU: %s (cc %d.%d); %zu variants compiled by kcached in %.1f s\n",
              (*gpu)->device().name.c_str(), (*gpu)->device().cc_major, (*gpu)->device().cc_minor,
              compiled.size(), manifest.value("compile_seconds", 0.0));

  std::map<std::string, Summary> summaries;
  std::int64_t m = 0, n = 0, k = 0;
  int repeats = 10;
  for (const char* strategy : {"exhaustive", "halving"}) {
    json search_json = manifest["search"];
    search_json["strategy"] = {{"kind", strategy}};
    auto search = parse_autotune(search_json.dump());
    if (!search) {
      std::fprintf(stderr, "%s\n", search.error().c_str());
      return 2;
    }
    auto space = expand(*search);
    m = search->benchmark.shapes.at("M");
    n = search->benchmark.shapes.at("N");
    k = search->benchmark.shapes.at("K");
    repeats = search->benchmark.repeats;
    std::printf("searching: %s over %zu variants...\n", strategy, space->variants.size());
    std::fflush(stdout);
    BenchRequest base;
    base.search_json = search->json;
    base.device = "cuda";
    base.entry = entry;
    base.reference = {"reference", reference.variant.params, *reference.binary};
    const TuningTable table =
        run_search(*search, *space, compiled, base,
                   [&](const BenchRequest& request) { return bench_on_gpu(**gpu, request); });
    summaries[strategy] = summarize(table);
    if (std::string(strategy) == "exhaustive") {
      std::vector<const TuningRow*> ok;
      for (const TuningRow& row : table.rows) {
        if (row.status == "ok") {
          ok.push_back(&row);
        }
      }
      std::sort(ok.begin(), ok.end(),
                [](const TuningRow* a, const TuningRow* b) { return a->median_us < b->median_us; });
      std::printf("\nfastest and slowest correct variants (exhaustive, M=N=K=%lld):\n",
                  static_cast<long long>(m));
      for (std::size_t i = 0; i < ok.size(); ++i) {
        if (i < 5 || i + 3 >= ok.size()) {
          std::printf("  %-36s %10.1f us  %6.2f TFLOP/s\n", ok[i]->id.c_str(), ok[i]->median_us,
                      tflops(ok[i]->median_us, m, n, k));
        } else if (i == 5) {
          std::printf("  ...\n");
        }
      }
    }
  }
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
  compare_with_cublas(**gpu, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), repeats,
                      ex.best_us);
  return ex.winner == "none" ? 1 : 0;
}
