// kcache_trainer: a trainer's start-up against kcached, for real.
//
// It needs the corpus of corpus.h (36 CUDA kernels for sm_90a, 21 CPU kernels
// in C++ and LLVM IR). It keys each kernel (kcache key manifest: the kernel's
// source digest, guards-free, the hardware's binary class, options), looks all
// keys up in one batch, submits the misses as compile jobs and, while the
// service compiles, runs its fallback (the reference implementations) and
// shows progress. Then it loads every artifact: CPU kernels are run and
// checked, CUBINs are checked for sm_90 and, on a GPU host, run and checked.
//
//   kcache_trainer --phase NAME [--url URL] [--results FILE.jsonl] [--export DIR]
//   kcache_trainer --table FILE.jsonl        the phases side by side
//
// --export DIR writes the CUBINs for kcache_gpu_corpus_check on a GPU host.

#include "checks.h"
#include "corpus.h"

#include <kcache/cachekey/hardware.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

namespace {

using namespace kcache;
using trainer::Device;
using trainer::Kernel;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string cpu_target(const cachekey::CpuInfo& cpu) {
  if (cpu.isa_level == "avx512") {
    return "x86-64-v4";
  }
  if (cpu.isa_level == "avx2") {
    return "x86-64-v3";
  }
  return cpu.isa_level == "sse4.2" ? "x86-64-v2" : "x86-64";
}

std::string key_of(const Kernel& k, const std::string& cpu_class) {
  cachekey::ToolchainFingerprint toolchain;
  toolchain.add("kcache-demo-trainer", "1");
  auto manifest =
      cachekey::KeyBuilder()
          .ns("kcache-demo-trainer")
          .graph_digest(cachekey::to_hex(cachekey::Sha256::of(compiler::spec_to_json(k.spec))))
          .hardware(k.device == Device::kCuda ? "cuda:" + k.spec.target : cpu_class)
          .toolchain(toolchain)
          .options(k.spec.options)
          .build();
  return manifest ? manifest->key() : std::string();
}

void progress_line(std::size_t done, std::size_t total, std::size_t running, std::size_t queued,
                   std::size_t fallbacks) {
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::fprintf(stderr,
               "%scompiling [%s%s] %zu/%zu done, %zu running, %zu queued; fallback ran %zu "
               "reference kernels%s",
               isatty(STDERR_FILENO) ? "\r" : "", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total, running, queued, fallbacks,
               isatty(STDERR_FILENO) ? "   " : "\n");
}

struct Options {
  std::string url = "http://127.0.0.1:7070";
  std::string phase;
  std::string results;
  std::string export_dir;
  std::chrono::seconds timeout{900};
};

int run_phase(const Options& opt) {
  const cachekey::CpuInfo cpu = cachekey::detect_cpu();
  const std::string cpu_class = cachekey::hardware_class(cpu).binary_class;
  const std::vector<Kernel> corpus = trainer::build_corpus(cpu_target(cpu));
  std::vector<std::string> keys;
  keys.reserve(corpus.size());
  for (const Kernel& k : corpus) {
    keys.push_back(key_of(k, cpu_class));
  }
  std::size_t cuda = 0;
  for (const Kernel& k : corpus) {
    cuda += k.device == Device::kCuda;
  }
  std::printf("trainer: %zu kernels (%zu CUDA for sm_90a, %zu CPU for %s), kcached at %s\n",
              corpus.size(), cuda, corpus.size() - cuda, cpu_target(cpu).c_str(), opt.url.c_str());

  client::ClientOptions co;
  co.url = opt.url;
  co.timeout = std::chrono::seconds(10);
  auto created = client::Client::create(co);
  if (!created) {
    std::fprintf(stderr, "trainer: %s\n", created.error().message.c_str());
    return 2;
  }
  client::Client& kc = **created;

  // 1. One round trip tells what is cached.
  const auto start = Clock::now();
  auto first = kc.batch_get(keys);
  if (!first) {
    std::fprintf(stderr, "trainer: lookup failed (%s); a real trainer would compile locally\n",
                 first.error().message.c_str());
    return 3;
  }
  std::vector<std::optional<client::Artifact>> artifacts = std::move(*first);
  std::size_t hits = 0;
  for (const auto& a : artifacts) {
    hits += a.has_value();
  }

  // 2. Misses become compile jobs; the trainer goes on with its fallback.
  std::map<std::size_t, std::string> pending; // corpus index -> job id
  std::map<std::string, std::size_t> submitted_as;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (artifacts[i]) {
      continue;
    }
    auto s = kc.submit(keys[i], compiler::spec_to_json(corpus[i].spec));
    while (s && s->status == "busy") {
      std::this_thread::sleep_for(s->retry_after);
      s = kc.submit(keys[i], compiler::spec_to_json(corpus[i].spec));
    }
    if (!s) {
      std::fprintf(stderr, "trainer: submit failed: %s\n", s.error().message.c_str());
      return 3;
    }
    ++submitted_as[s->status];
    if (s->job && !s->job->finished()) {
      pending[i] = s->job->id;
    }
  }
  std::size_t fallbacks = 0, compile_ms = 0, failed = 0;
  std::size_t fallback_next = 0;
  const std::size_t to_compile = pending.size();
  std::map<std::size_t, std::string> finished_state;
  while (!pending.empty()) {
    if (seconds_since(start) > static_cast<double>(opt.timeout.count())) {
      std::fprintf(stderr, "\ntrainer: gave up waiting after %lld s\n",
                   static_cast<long long>(opt.timeout.count()));
      return 4;
    }
    // The fallback: the eager reference of a kernel still compiling.
    const Kernel& fallback =
        corpus[std::next(pending.begin(), static_cast<long>(fallback_next++ % pending.size()))
                   ->first];
    (void)trainer::make_problem(fallback);
    ++fallbacks;
    std::size_t running = 0, queued = 0;
    for (auto it = pending.begin(); it != pending.end();) {
      auto job = kc.job(it->second);
      if (job && job->finished()) {
        compile_ms += static_cast<std::size_t>(job->compile_ms);
        if (job->state != kcache::client::JobState::kSucceeded) {
          ++failed;
          std::fprintf(stderr, "\ntrainer: %s failed: %s\n%s\n", corpus[it->first].name.c_str(),
                       job->error_message.c_str(), job->log.c_str());
        }
        it = pending.erase(it);
        continue;
      }
      if (job) {
        running += job->state == kcache::client::JobState::kRunning;
        queued += job->state == kcache::client::JobState::kQueued;
      }
      ++it;
    }
    progress_line(to_compile - pending.size(), to_compile, running, queued, fallbacks);
    if (!pending.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (to_compile > 0 && isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "\n");
  }

  // 3. Everything compiled lands in the cache: one more batch fetches it.
  if (hits < corpus.size()) {
    auto again = kc.batch_get(keys);
    if (!again) {
      std::fprintf(stderr, "trainer: fetch failed: %s\n", again.error().message.c_str());
      return 3;
    }
    artifacts = std::move(*again);
  }
  const double ready_s = seconds_since(start);

  // 4. Use the kernels: run the CPU ones, check the CUBINs (and run them on a GPU).
  const auto verify_start = Clock::now();
  std::string why_no_gpu;
  auto gpu = trainer::GpuChecker::open(why_no_gpu);
  std::size_t cpu_ok = 0, cubin_ok = 0, gpu_ok = 0, missing = 0, bad = 0;
  if (!opt.export_dir.empty()) {
    std::filesystem::create_directories(opt.export_dir);
  }
  json exported = json::array();
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const Kernel& k = corpus[i];
    if (!artifacts[i] || artifacts[i]->files.empty()) {
      ++missing;
      continue;
    }
    const std::string& binary = artifacts[i]->files.front().data;
    trainer::CheckResult r;
    if (k.device == Device::kCpu) {
      r = trainer::check_cpu(k, binary);
      cpu_ok += r.ok;
    } else {
      r = trainer::check_cubin_arch(k, binary);
      cubin_ok += r.ok;
      if (r.ok && gpu) {
        r = gpu->check(k, binary);
        gpu_ok += r.ok;
      }
      if (!opt.export_dir.empty()) {
        std::string file = k.name;
        std::replace(file.begin(), file.end(), '/', '_');
        std::ofstream(std::filesystem::path(opt.export_dir) / (file + ".cubin"), std::ios::binary)
            << binary;
        exported.push_back({{"name", k.name}, {"file", file + ".cubin"}});
      }
    }
    if (!r.ok) {
      ++bad;
      std::fprintf(stderr, "trainer: %s is wrong: %s\n", k.name.c_str(), r.detail.c_str());
    }
  }
  if (!opt.export_dir.empty()) {
    std::ofstream(std::filesystem::path(opt.export_dir) / "corpus.json") << exported.dump(1);
  }
  const double verify_s = seconds_since(verify_start);

  std::printf("trainer: %zu hits at the first lookup, %zu compiled by the service "
              "(%.1f s of compiler time), %zu failed; all ready in %.3f s\n",
              hits, to_compile - failed, static_cast<double>(compile_ms) / 1000.0, failed, ready_s);
  std::printf("trainer: checked in %.2f s: %zu/%zu CPU kernels correct, %zu/%zu CUBINs for sm_90, ",
              verify_s, cpu_ok, corpus.size() - cuda, cubin_ok, cuda);
  if (gpu) {
    std::printf("%zu/%zu correct on %s\n", gpu_ok, cuda, gpu->device_name().c_str());
  } else {
    std::printf("not run (no GPU here: %s)\n", why_no_gpu.c_str());
  }
  if (!opt.results.empty()) {
    json row{{"phase", opt.phase},
             {"kernels", corpus.size()},
             {"hits", hits},
             {"compiled", to_compile - failed},
             {"joined_or_cached", corpus.size() - hits - to_compile},
             {"failed", failed},
             {"ready_s", ready_s},
             {"compile_s", static_cast<double>(compile_ms) / 1000.0},
             {"cpu_ok", cpu_ok},
             {"cpu_total", corpus.size() - cuda},
             {"cubin_ok", cubin_ok},
             {"cuda_total", cuda},
             {"gpu_ok", gpu ? json(gpu_ok) : json(nullptr)},
             {"fallbacks", fallbacks}};
    std::ofstream(opt.results, std::ios::app) << row.dump() << "\n";
  }
  return failed == 0 && missing == 0 && bad == 0 ? 0 : 1;
}

int print_table(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      rows.push_back(json::parse(line));
    }
  }
  if (rows.empty()) {
    std::fprintf(stderr, "trainer: no results in %s\n", path.c_str());
    return 2;
  }
  const double cold = rows.front().value("ready_s", 0.0);
  std::printf("\n| phase | kernels | hits | compiled | failed | ready in | speedup vs cold | "
              "CPU kernels correct | CUBINs sm_90 | GPU run "
              "|\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const json& r : rows) {
    const double ready = r.value("ready_s", 0.0);
    const std::string gpu = r["gpu_ok"].is_null() ? "no GPU"
                                                  : std::to_string(r["gpu_ok"].get<int>()) + "/" +
                                                        std::to_string(r.value("cuda_total", 0));
    std::printf("| %s | %d | %d | %d | %d | %.3f s | %.0fx | %d/%d | %d/%d | %s |\n",
                r.value("phase", "").c_str(), r.value("kernels", 0), r.value("hits", 0),
                r.value("compiled", 0), r.value("failed", 0), ready, ready > 0 ? cold / ready : 0.0,
                r.value("cpu_ok", 0), r.value("cpu_total", 0), r.value("cubin_ok", 0),
                r.value("cuda_total", 0), gpu.c_str());
  }
  std::printf("\ncold: the service compiled on its workers (%.1f s of compiler time) while the "
              "trainer ran its fallback.\n",
              rows.front().value("compile_s", 0.0));
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Options opt;
  if (const char* url = std::getenv("KCACHE_URL"); url != nullptr && *url != '\0') {
    opt.url = url;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--table" && has_value) {
      return print_table(argv[++i]);
    }
    if (a == "--url" && has_value) {
      opt.url = argv[++i];
    } else if (a == "--phase" && has_value) {
      opt.phase = argv[++i];
    } else if (a == "--results" && has_value) {
      opt.results = argv[++i];
    } else if (a == "--export" && has_value) {
      opt.export_dir = argv[++i];
    } else if (a == "--timeout-s" && has_value) {
      opt.timeout = std::chrono::seconds(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: kcache_trainer --phase NAME [--url URL] [--results FILE.jsonl] "
                           "[--export DIR] [--timeout-s N]\n"
                           "       kcache_trainer --table FILE.jsonl\n"
                           "       kcache_trainer --check-exported DIR\n");
      return 2;
    }
  }
  if (opt.phase.empty()) {
    opt.phase = "run";
  }
  return run_phase(opt);
}
