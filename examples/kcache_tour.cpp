// kcache_tour: what kcache does today, end to end on real data.
//   1. fingerprints this machine (CPU via cpuid, GPUs via the CUDA driver);
//   2. keys every graph in a folder (JSON graph format) with guards, toolchain
//      and options, and explains why a changed graph gets another key;
//   3. looks each key up in kcached through libkcache and, on a miss, stores an
//      artifact: the canonical graph and its key manifest (no compiler backend
//      exists yet, so nothing is compiled).
// Run it again, or after restarting kcached: the lookups hit.
//
//   kcache_tour --url http://127.0.0.1:7070 --graphs DIR

#include <kcache/cachekey/explain.h>
#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/graph_json.h>
#include <kcache/cachekey/hardware.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/client/client.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using namespace kcache;
using Clock = std::chrono::steady_clock;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Guards name the graph's own symbols (a graph's guards may use no other
// names): here, the first symbolic dim of the first input.
std::vector<std::string> batch_guards(const cachekey::Graph& graph) {
  for (cachekey::NodeId input : graph.inputs()) {
    for (const cachekey::Dim& dim : graph.nodes()[input].outputs.at(0).shape) {
      if (const auto* symbol = std::get_if<std::string>(&dim.value)) {
        return {*symbol + " % 8 == 0", "1 <= " + *symbol + " <= 65536"};
      }
    }
  }
  return {};
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Args {
  std::string url = "http://127.0.0.1:7070";
  std::string graphs_dir;
};

int usage() {
  std::fprintf(stderr, "usage: kcache_tour --url URL --graphs DIR\n");
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--url") {
      args.url = argv[i + 1];
    } else if (flag == "--graphs") {
      args.graphs_dir = argv[i + 1];
    } else {
      return usage();
    }
  }
  if (args.graphs_dir.empty()) {
    return usage();
  }

  // 1. Hardware.
  const cachekey::CpuInfo cpu = cachekey::detect_cpu();
  const cachekey::HardwareClass cpu_class = cachekey::hardware_class(cpu);
  std::printf("== hardware\n  cpu  %-24s tuning class %s\n", cpu_class.binary_class.c_str(),
              cpu_class.tuning_class.c_str());
  const auto gpus = cachekey::detect_gpus();
  if (gpus.empty()) {
    std::printf("  gpu  none (no CUDA driver or device on this host)\n");
  }
  for (const cachekey::GpuInfo& gpu : gpus) {
    const auto hc = cachekey::hardware_class(gpu);
    std::printf("  gpu%d %-24s tuning class %s\n", gpu.ordinal, hc.binary_class.c_str(),
                hc.tuning_class.c_str());
  }

  // 2. Keys.
  cachekey::ToolchainFingerprint toolchain;
  toolchain.add("kcache", std::string(cachekey::kKcacheCodegenVersion)).add("cxx", __VERSION__);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(args.graphs_dir)) {
    if (entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  struct Keyed {
    std::string name;
    cachekey::Graph graph;
    cachekey::KeyManifest manifest;
  };
  std::vector<Keyed> keyed;
  std::printf("\n== keys (binary class %s)\n  %-16s %6s  %s\n", cpu_class.binary_class.c_str(),
              "graph", "nodes", "key");
  for (const fs::path& file : files) {
    auto graph = cachekey::parse_graph_json(read_file(file));
    if (!graph) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), graph.error().message.c_str());
      return 1;
    }
    auto manifest = cachekey::KeyBuilder()
                        .ns("tour")
                        .graph(*graph)
                        .guards(batch_guards(*graph))
                        .hardware(cpu_class.binary_class)
                        .toolchain(toolchain)
                        .options({"-O3", "-march=native", "-I/tmp/ignored", "-Wall"})
                        .build();
    if (!manifest) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), manifest.error().message.c_str());
      return 1;
    }
    std::printf("  %-16s %6zu  %s\n", file.stem().c_str(), graph->nodes().size(),
                manifest->key().c_str());
    keyed.push_back({file.stem().string(), std::move(*graph), std::move(*manifest)});
  }

  // Explain a miss: the same first graph with one attribute changed.
  if (!keyed.empty()) {
    cachekey::Graph changed;
    for (const cachekey::Node& node : keyed[0].graph.nodes()) {
      if (node.op == cachekey::Graph::kInputOp) {
        changed.add_input(node.name, node.outputs.at(0));
        continue;
      }
      cachekey::Attrs attrs = node.attrs;
      if (attrs.count("approximate")) {
        attrs["approximate"] = "none";
      }
      const auto id = changed.add_node(node.name, node.op, node.inputs, node.outputs, attrs);
      if (id && node.effectful) {
        (void)changed.mark_effectful(*id);
      }
    }
    for (const cachekey::ValueRef& out : keyed[0].graph.outputs()) {
      (void)changed.add_output(out);
    }
    auto other = cachekey::KeyBuilder()
                     .ns("tour")
                     .graph(changed)
                     .guards(batch_guards(changed))
                     .hardware(cpu_class.binary_class)
                     .toolchain(toolchain)
                     .options({"-O3", "-march=native"})
                     .build();
    std::printf("\n== explain: %s with one attribute changed\n%s", keyed[0].name.c_str(),
                cachekey::to_text(cachekey::explain(keyed[0].manifest, *other)).c_str());
  }

  // 3. Lookups through kcached.
  client::ClientOptions options;
  options.url = args.url;
  auto kcached = client::Client::create(options);
  if (!kcached) {
    std::fprintf(stderr, "%s\n", kcached.error().message.c_str());
    return 1;
  }
  std::printf("\n== artifacts from kcached at %s\n  %-16s %-6s %9s  %s\n", args.url.c_str(),
              "graph", "lookup", "ms", "action");
  int hits = 0;
  for (const Keyed& k : keyed) {
    const auto start = Clock::now();
    auto found = (*kcached)->get(k.manifest.key());
    const double lookup_ms = ms_since(start);
    if (!found) {
      // A trainer would fail open here and compile locally; the tour stops.
      std::fprintf(stderr, "kcached: %s\n", found.error().message.c_str());
      return 1;
    }
    if (found->has_value()) {
      ++hits;
      std::printf("  %-16s %-6s %9.3f  served %zu files\n", k.name.c_str(), "hit", lookup_ms,
                  (*found)->files.size());
      continue;
    }
    client::PutOptions put_options;
    put_options.producer = "kcache_tour";
    put_options.manifest_json = cachekey::manifest_to_json(k.manifest);
    auto put = (*kcached)->put(k.manifest.key(),
                               {{"graph.json", cachekey::graph_to_json(k.graph)},
                                {"manifest.json", cachekey::manifest_to_json(k.manifest)}},
                               put_options);
    if (!put) {
      std::fprintf(stderr, "store failed: %s\n", put.error().message.c_str());
      return 1;
    }
    std::printf("  %-16s %-6s %9.3f  stored graph.json + manifest.json\n", k.name.c_str(), "miss",
                lookup_ms);
  }
  std::printf("\n%d of %zu lookups hit.\n", hits, keyed.size());
  return 0;
}
