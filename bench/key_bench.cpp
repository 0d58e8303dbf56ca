// key_bench: microseconds to build one key for a 1,000-node graph with 50
// guards and 40 compile flags, through the public KeyBuilder. The anchor in
// the same run is the SHA-256 of the graph's JSON text (what a client that
// hashed its graph as bytes would pay), so the ratio says what canonical
// keying costs over plain hashing. Prints every run and the median.
//
//   key_bench [--runs N] [--keys-per-run M]

#include <kcache/cachekey/graph.h>
#include <kcache/cachekey/graph_json.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace kcache::cachekey;
using Clock = std::chrono::steady_clock;

// A chain of 999 ops over two symbolic inputs, like an unrolled MLP stack.
Graph make_graph() {
  Graph g;
  const Dim batch = Dim::symbol("batch");
  const Dim seq = Dim::symbol("seq");
  const Dim hidden = Dim::fixed(1024);
  TensorType act{"bf16", {batch, seq, hidden}, {}};
  const NodeId x = g.add_input("x", act);
  const NodeId w = g.add_input("w", TensorType{"bf16", {hidden, hidden}, {}});
  NodeId last = x;
  static constexpr std::string_view kOps[] = {"aten.mm", "aten.add", "aten.gelu", "aten.mul"};
  for (int i = 0; static_cast<int>(g.nodes().size()) < 1000; ++i) {
    const std::string_view op = kOps[i % 4];
    std::vector<ValueRef> inputs = {{last, 0}};
    if (op == "aten.mm" || op == "aten.mul") {
      inputs.push_back({op == "aten.mm" ? w : x, 0});
    }
    Attrs attrs;
    if (op == "aten.gelu") {
      attrs.emplace("approximate", AttrValue{std::string("tanh")});
    }
    last = *g.add_node("n" + std::to_string(i), std::string(op), std::move(inputs), {act},
                       std::move(attrs));
  }
  (void)g.add_output({last, 0});
  return g;
}

std::vector<std::string> make_guards() {
  std::vector<std::string> guards;
  for (int i = 0; i < 25; ++i) {
    guards.push_back("batch % " + std::to_string(i + 2) + " == 0 or batch > " +
                     std::to_string(i * 3));
    guards.push_back(std::to_string(i + 1) + " <= seq <= " + std::to_string(4096 + i));
  }
  return guards;
}

std::vector<std::string> make_flags() {
  std::vector<std::string> flags = {"-O3", "--use_fast_math", "-Xptxas", "-O3", "-lineinfo"};
  for (int i = 0; static_cast<int>(flags.size()) < 40; ++i) {
    flags.push_back("-DPARAM_" + std::to_string(i) + "=" + std::to_string(i * 7));
  }
  return flags;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  int runs = 5;
  int keys_per_run = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (flag == "--runs") {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--keys-per-run") {
      keys_per_run = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: key_bench [--runs N] [--keys-per-run M]\n");
      return 2;
    }
  }
  const Graph graph = make_graph();
  const std::vector<std::string> guards = make_guards();
  const std::vector<std::string> flags = make_flags();
  const std::string graph_text = graph_to_json(graph);
  const auto toolchain = ToolchainFingerprint().add("nvrtc", "13.0").add("torch", "2.11.0");

  std::string key;
  auto build_key = [&] {
    auto manifest = KeyBuilder()
                        .ns("bench")
                        .graph(graph)
                        .guards(guards)
                        .hardware("cuda:sm_90a")
                        .toolchain(toolchain)
                        .options(flags)
                        .build();
    if (!manifest) {
      std::fprintf(stderr, "key_bench: %s\n", manifest.error().message.c_str());
      std::exit(1);
    }
    key = manifest->key();
  };
  std::string anchor_digest;
  auto anchor = [&] { anchor_digest = to_hex(Sha256::of(graph_text)); };
  auto time_us = [&](auto&& fn) {
    const auto start = Clock::now();
    for (int k = 0; k < keys_per_run; ++k) {
      fn();
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / keys_per_run;
  };

  std::printf("key_bench: %zu nodes, %zu guards, %zu flags, %d keys per run\n",
              graph.nodes().size(), guards.size(), flags.size(), keys_per_run);
  std::vector<double> key_us, anchor_us;
  for (int r = 0; r < runs; ++r) {
    key_us.push_back(time_us(build_key));
    anchor_us.push_back(time_us(anchor));
    std::printf("run %d: key %.1f us, sha256 of the graph's JSON (%zu B) %.1f us, ratio %.2fx\n",
                r + 1, key_us.back(), graph_text.size(), anchor_us.back(),
                key_us.back() / anchor_us.back());
  }
  std::printf("median: key %.1f us, anchor %.1f us, ratio %.2fx (key %s)\n", median(key_us),
              median(anchor_us), median(key_us) / median(anchor_us), key.c_str());
  return 0;
}
