// gpu_autotune_export: the build-machine half of the GPU autotune check. It
// expands an autotune search (bench/autotune/gemm_search.json), has kcached's
// workers compile every variant and the reference (NVRTC, as compile jobs:
// cached, deduplicated) and writes the CUBINs with a manifest, for
// gpu_autotune to benchmark on a GPU host.
//
//   gpu_autotune_export SEARCH.json OUT_DIR [--url URL]

#include "search_file.h"

#include <kcache/client/client.h>
#include <kcache/compiler/autotune_spec.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

namespace {

using namespace kcache;
using nlohmann::json;
namespace fs = std::filesystem;

// The search's file name is part of the key: every search has a variant
// called "reference", and searches exported through one kcached must not get
// each other's CUBINs.
std::string key_of(const std::string& search, const std::string& variant_id) {
  std::string key = "gpu-autotune." + search + "." + variant_id;
  std::replace(key.begin(), key.end(), ',', '.');
  return key;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gpu_autotune_export SEARCH.json OUT_DIR [--url URL]\n");
    return 2;
  }
  const fs::path search_path = argv[1];
  const fs::path out_dir = argv[2];
  const std::string search_name = search_path.stem().string();
  client::ClientOptions options;
  options.url = argc >= 5 && std::string(argv[3]) == "--url" ? argv[4] : "http://127.0.0.1:7070";
  options.timeout = std::chrono::seconds(30);

  auto loaded = bench::load_search_file(search_path);
  if (!loaded) {
    std::fprintf(stderr, "%s: not an autotune spec\n", argv[1]);
    return 2;
  }
  json spec = *std::move(loaded);
  auto base = compiler::spec_from_json(spec.dump());
  auto search = compiler::parse_autotune(spec["autotune"].dump());
  if (!base || !search) {
    std::fprintf(stderr, "%s\n", !base ? base.error().c_str() : search.error().c_str());
    return 2;
  }
  auto space = compiler::expand(*search);
  if (!space) {
    std::fprintf(stderr, "%s\n", space.error().c_str());
    return 2;
  }
  auto kc = client::Client::create(options);
  if (!kc) {
    std::fprintf(stderr, "%s\n", kc.error().message.c_str());
    return 2;
  }
  std::vector<compiler::Variant> all = space->variants;
  all.push_back({search->benchmark.reference, "reference"});
  std::printf("%zu variants (%zu pruned by the constraints) + the reference: compiling through "
              "kcached at %s\n",
              space->variants.size(), space->pruned.size(), options.url.c_str());

  // Submit everything, then collect: the workers compile in parallel.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> jobs(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    auto s = (*kc)->submit(key_of(search_name, all[i].id),
                           compiler::spec_to_json(compiler::variant_spec(*base, all[i])));
    if (!s) {
      std::fprintf(stderr, "submit: %s\n", s.error().message.c_str());
      return 3;
    }
    if (s->job) {
      jobs[i] = s->job->id;
    }
  }
  fs::create_directories(out_dir);
  json variants = json::array();
  json reference;
  std::size_t compiled = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    json entry{{"id", all[i].id}, {"params", all[i].params}};
    if (!jobs[i].empty()) {
      auto job = (*kc)->job(jobs[i], std::chrono::minutes(5));
      if (job && job->state != kcache::client::JobState::kSucceeded) {
        entry["error"] = job->error_message + "\n" + job->log;
      }
    }
    if (!entry.contains("error")) {
      auto artifact = (*kc)->get(key_of(search_name, all[i].id));
      if (artifact && *artifact && !(*artifact)->files.empty()) {
        const std::string file = std::to_string(i) + ".cubin";
        std::ofstream(out_dir / file, std::ios::binary) << (*artifact)->files.front().data;
        entry["file"] = file;
        ++compiled;
      } else {
        entry["error"] = "not in the cache";
      }
    }
    if (i + 1 == all.size()) {
      reference = std::move(entry);
    } else {
      variants.push_back(std::move(entry));
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spec.erase("autotune");
  const json manifest{{"spec", spec},
                      {"search", json::parse(search->json)},
                      {"entry", base->name_expressions.front()},
                      {"variants", std::move(variants)},
                      {"reference", std::move(reference)},
                      {"compile_seconds", seconds}};
  std::ofstream(out_dir / "manifest.json") << protocol::json_text(manifest, 1);
  std::printf("%zu of %zu compiled in %.1f s through kcached; written to %s\n", compiled,
              all.size(), seconds, out_dir.c_str());
  return compiled == all.size() ? 0 : 1;
}
