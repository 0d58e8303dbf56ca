#include "bench_serve.h"

#include "cpu_bench.h"

#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/cuda_driver.h>
#include <kcache/compiler/gpu_bench.h>
#include <kcache/compiler/sandbox.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

namespace kcache::compiler {
namespace {

// The next request of the stream: nullopt at a clean EOF.
tl::expected<std::optional<std::string>, std::string> read_frame(std::FILE* in) {
  std::string length;
  for (int c; (c = std::fgetc(in)) != '\n';) {
    if (c == EOF) {
      if (length.empty()) {
        return std::nullopt;
      }
      return tl::unexpected(std::string("the request stream ended inside a frame's length"));
    }
    if (c < '0' || c > '9' || length.size() >= 12) {
      return tl::unexpected(std::string("a bench request frame starts with its length"));
    }
    length.push_back(static_cast<char>(c));
  }
  const std::uint64_t size = std::stoull(length.empty() ? "0" : length);
  if (size > kMaxBenchFrame) {
    return tl::unexpected("a bench request of " + length + " bytes is over the limit");
  }
  std::string body(size, '\0');
  if (std::fread(body.data(), 1, body.size(), in) != body.size()) {
    return tl::unexpected(std::string("the request stream ended inside a frame"));
  }
  return body;
}

// The GPU, opened at the first CUDA request and kept.
struct Gpu {
  std::unique_ptr<CudaDriver> driver;
  std::unique_ptr<GpuBench> bench;
  std::string error; // why it cannot be opened
};

// A CPU variant is the spec's own code running in this process: before the
// first one runs, Landlock confines the worker to reading the system's
// libraries and writing nothing, as a compile is confined, and (where the
// kernel can) to no TCP and no signals to processes outside it, kcached's
// included. (A variant is
// loaded from memory and called through libffi: it needs no file.) GPU
// variants run on the device and are not confined: the driver opens device
// files as it goes.
void confine_before_running_cpu_code(bool& confined) {
  if (confined) {
    return;
  }
  confined = true;
  SandboxPolicy policy;
  policy.read_paths = system_read_paths();
  policy.write_paths = {"/dev/null"};
  policy.isolate = true;
  if (auto done = confine_filesystem(policy); !done) {
    // kcached says at start that workers run unconfined (kcache-worker --sandbox).
    std::cerr << "kcache-worker: " << done.error() << "; benchmarking unconfined\n";
  }
}

} // namespace

int serve_bench(int gpu_ordinal) {
  // Results go out on a descriptor of their own: a variant (or the CUDA
  // driver) printing to stdout must not garble them, so stdout becomes stderr.
  // (A descriptor well above the ones a program opens, close-on-exec: a
  // stray write to fd 3 does not land in it. A CPU variant is code in this
  // process, so what it reports of itself is its own word: see cpu_bench.h.)
  const int results_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 200);
  std::FILE* out = results_fd >= 0 ? ::fdopen(results_fd, "w") : nullptr;
  if (out == nullptr || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::cerr << "kcache-worker: cannot set up the results channel\n";
    return 2;
  }
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(out, &std::fclose);
  Gpu gpu;
  bool confined = false;
  for (;;) {
    auto frame = read_frame(stdin);
    if (!frame) {
      std::cerr << "kcache-worker: " << frame.error() << "\n";
      return 2;
    }
    if (!*frame) {
      return 0;
    }
    auto request = decode_bench_request(**frame);
    if (!request) {
      std::cerr << "kcache-worker: " << request.error() << "\n";
      return 2;
    }
    if (request->device != "cuda") {
      confine_before_running_cpu_code(confined);
      run_cpu_bench(*request, out);
      continue;
    }
    if (!gpu.driver && gpu.error.empty()) {
      // Through the driver API, dlopen'ed.
      if (auto opened = CudaDriver::open(gpu_ordinal)) {
        gpu.driver = std::move(*opened);
        gpu.bench = std::make_unique<GpuBench>(*gpu.driver);
      } else {
        gpu.error = opened.error();
      }
    }
    if (!gpu.driver) {
      for (const BenchVariant& v : request->variants) {
        write_bench_result(out, BenchResult{v.id, "error", 0, 0, 0, gpu.error});
      }
      continue;
    }
    gpu.bench->run(*request, [&](const BenchResult& r) { write_bench_result(out, r); });
    if (gpu.bench->context_lost()) {
      // Unanswered variants go on in a fresh worker, none blamed; answered
      // ones are done, and the next request must not meet a broken context.
      return kBenchRestartExit;
    }
  }
}

} // namespace kcache::compiler
