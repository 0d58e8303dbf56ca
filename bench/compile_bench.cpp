// compile_bench: the demo trainer's corpus (36 CUDA kernels for sm_90a, 21 CPU
// kernels), compiled four ways in one run:
//   anchor   the local toolchain as a subprocess per kernel, one after another:
//            nvcc -cubin for CUDA, clang++ -shared for C++ and LLVM IR (what a
//            trainer without kcache does)
//   cold/1   kcached with 1 worker: NVRTC, clang and lld in kcache-worker
//   cold/2   kcached with 2 workers
//   warm     the same keys again: one batch get, and one get per kernel
// Ratios are anchor time / mode time (higher is better).
//
//   compile_bench [--cuda-only | --cpu-only]

#include "corpus.h"
#include "kcached_process.h"
#include "temp_dir.h"

#include <kcache/client/client.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

namespace {

using namespace kcache;
using trainer::Device;
using trainer::Kernel;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The local toolchain, one subprocess per kernel. nullopt if it is missing.
std::optional<double> anchor(const std::vector<Kernel>& kernels, std::size_t& failures) {
  const std::string nvcc = KCACHE_NVCC, clangxx = KCACHE_CLANGXX;
  testing::TempDir dir;
  double total = 0;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Kernel& k = kernels[i];
    const std::string tool = k.device == Device::kCuda ? nvcc : clangxx;
    if (tool.empty()) {
      return std::nullopt;
    }
    const auto kdir = dir.path() / std::to_string(i);
    std::filesystem::create_directories(kdir);
    std::ofstream(kdir / k.spec.source.name) << k.spec.source.text;
    for (const auto& h : k.spec.headers) {
      std::ofstream(kdir / h.name) << h.text;
    }
    std::vector<std::string> argv = {tool};
    if (k.device == Device::kCuda) {
      argv.insert(argv.end(),
                  {"-cubin", "-arch=" + k.spec.target, "-o", (kdir / "k.cubin").string()});
    } else {
      argv.insert(argv.end(),
                  {"-shared", "-fPIC", "-march=" + k.spec.target, "-o", (kdir / "k.so").string()});
    }
    argv.insert(argv.end(), k.spec.options.begin(), k.spec.options.end());
    argv.push_back((kdir / k.spec.source.name).string());
    std::string out;
    const auto start = Clock::now();
    const int rc = testing::run_command(argv, out);
    total += since(start);
    if (rc != 0) {
      ++failures;
      std::fprintf(stderr, "anchor: %s failed (%d): %s\n", k.name.c_str(), rc, out.c_str());
    }
  }
  return total;
}

struct ServiceRun {
  double cold_s = 0;
  double warm_batch_s = 0;
  double warm_each_s = 0;
  double compile_s = 0; // compiler time reported by the workers
  std::size_t failures = 0;
};

ServiceRun through_service(const std::vector<Kernel>& kernels, int workers) {
  testing::KcachedProcess kcached({"--workers", std::to_string(workers), "--log-level", "warn"});
  client::ClientOptions o;
  o.url = kcached.url();
  o.timeout = std::chrono::seconds(30);
  auto c = std::move(*client::Client::create(o));
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    keys.push_back("bench-" + std::to_string(i));
  }
  ServiceRun run;
  const auto start = Clock::now();
  std::vector<std::string> jobs;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    auto s = c->submit(keys[i], compiler::spec_to_json(kernels[i].spec));
    if (s && s->job) {
      jobs.push_back(s->job->id);
    } else {
      ++run.failures;
    }
  }
  for (const std::string& id : jobs) {
    auto job = c->job(id, std::chrono::minutes(5));
    if (!job || job->state != kcache::client::JobState::kSucceeded) {
      ++run.failures;
      if (job) {
        std::fprintf(stderr, "service: %s\n%s\n", job->error_message.c_str(), job->log.c_str());
      }
      continue;
    }
    run.compile_s += static_cast<double>(job->compile_ms) / 1000.0;
  }
  run.cold_s = since(start);

  const auto batch = Clock::now();
  auto all = c->batch_get(keys);
  run.warm_batch_s = since(batch);
  if (!all) {
    ++run.failures;
  } else {
    for (const auto& a : *all) {
      run.failures += !a.has_value();
    }
  }
  const auto each = Clock::now();
  for (const std::string& key : keys) {
    auto a = c->get(key);
    run.failures += !(a && *a);
  }
  run.warm_each_s = since(each);
  return run;
}

// One table for one part of the corpus; returns the failures.
std::size_t bench(const char* title, const std::vector<Kernel>& kernels) {
  std::printf("\n== %s: %zu kernels\n", title, kernels.size());
  std::size_t anchor_failures = 0;
  const auto local = anchor(kernels, anchor_failures);
  const ServiceRun one = through_service(kernels, 1);
  const ServiceRun two = through_service(kernels, 2);

  const double base = local.value_or(0);
  const double n = static_cast<double>(kernels.size());
  auto row = [&](const std::string& mode, double s) {
    std::printf("| %-46s | %9.3f s | %9.2f ms | %8.1fx |\n", mode.c_str(), s, s * 1000 / n,
                base > 0 && s > 0 ? base / s : 0.0);
  };
  std::printf("| %-46s | %11s | %12s | %9s |\n|---|---|---|---|\n", "mode", "wall", "per kernel",
              "vs anchor");
  if (local) {
    row(std::string("anchor: ") +
            (kernels.front().device == Device::kCuda ? "nvcc -cubin" : "clang++ -shared") +
            " per kernel, serial",
        *local);
  } else {
    std::printf("(anchor toolchain not found: no ratios)\n");
  }
  row("cold through kcached, 1 worker", one.cold_s);
  row("cold through kcached, 2 workers", two.cold_s);
  row("warm through kcached, one batch get", two.warm_batch_s);
  row("warm through kcached, one get per kernel", two.warm_each_s);
  std::printf("worker compile time (sum over jobs): %.2f s with 1 worker, %.2f s with 2; "
              "2 workers vs 1: %.2fx; warm batch vs cold (2 workers): %.0fx\n",
              one.compile_s, two.compile_s, two.cold_s > 0 ? one.cold_s / two.cold_s : 0.0,
              two.warm_batch_s > 0 ? two.cold_s / two.warm_batch_s : 0.0);
  return anchor_failures + one.failures + two.failures;
}

} // namespace

int main(int argc, char** argv) {
  const std::string only = argc == 2 ? argv[1] : "";
  std::vector<Kernel> cuda, cpu;
  for (Kernel& k : trainer::build_corpus("x86-64-v3")) {
    (k.device == Device::kCuda ? cuda : cpu).push_back(std::move(k));
  }
  std::printf("compile_bench: the demo trainer's corpus; %u cores; anchors run serially, "
              "kcached's workers in parallel\n",
              std::thread::hardware_concurrency());
  std::size_t failures = 0;
  if (only != "--cpu-only") {
    failures += bench("CUDA C++ -> sm_90a CUBIN (service: NVRTC in kcache-worker)", cuda);
  }
  if (only != "--cuda-only") {
    failures +=
        bench("CPU C++ / LLVM IR -> shared object (service: clang + lld in kcache-worker)", cpu);
  }
  if (failures > 0) {
    std::printf("%zu failures\n", failures);
  }
  return failures == 0 ? 0 : 1;
}
