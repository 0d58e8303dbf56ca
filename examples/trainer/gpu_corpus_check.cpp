// kcache_gpu_corpus_check: on a GPU host, runs the CUBINs that the demo
// trainer exported (kcache_trainer --export DIR) through the CUDA driver API
// and compares each kernel's output with its CPU reference.
//
//   kcache_gpu_corpus_check DIR      exit 0 only if every kernel is correct
//
// Small on purpose: scripts/device/trainer_gpu_check.sh builds it on the GPU
// host from these sources alone (corpus, checks, CUBIN inspection, driver API).

#include "checks.h"
#include "corpus.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

namespace {

using kcache::trainer::Kernel;
using nlohmann::json;

// For the GPU host: CUBINs exported by --export, loaded and checked here.
int check_exported(const std::string& dir) {
  std::string why;
  auto gpu = kcache::trainer::GpuChecker::open(why);
  if (!gpu) {
    std::fprintf(stderr, "trainer: no GPU: %s\n", why.c_str());
    return 3;
  }
  std::ifstream in(std::filesystem::path(dir) / "corpus.json");
  const json list = json::parse(in, nullptr, false);
  if (!list.is_array()) {
    std::fprintf(stderr, "trainer: no corpus.json in %s\n", dir.c_str());
    return 2;
  }
  std::map<std::string, Kernel> by_name;
  for (Kernel& k : kcache::trainer::build_corpus("x86-64")) {
    by_name.emplace(k.name, std::move(k));
  }
  std::size_t ok = 0;
  for (const json& e : list) {
    const auto it = by_name.find(e.value("name", ""));
    std::ifstream f(std::filesystem::path(dir) / e.value("file", ""), std::ios::binary);
    const std::string cubin((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (it == by_name.end() || cubin.empty()) {
      std::printf("%-32s MISSING\n", e.value("name", "?").c_str());
      continue;
    }
    const auto r = gpu->check(it->second, cubin);
    ok += r.ok;
    std::printf("%-32s %s  max error %.2e %s\n", it->first.c_str(), r.ok ? "ok  " : "FAIL",
                r.max_error, r.detail.c_str());
  }
  std::printf("%zu/%zu CUDA kernels correct on %s\n", ok, list.size(), gpu->device_name().c_str());
  return ok == list.size() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kcache_gpu_corpus_check DIR\n");
    return 2;
  }
  return check_exported(argv[1]);
}
