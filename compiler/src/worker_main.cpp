// kcache-worker: compiles one CompileSpec read from stdin and writes the
// outcome to stdout (worker_protocol.h). One process per job, started by
// WorkerRunner with CPU-time and memory limits: a compiler that crashes,
// loops or eats memory takes down this process only.

#include "cpu_bench.h"

#include <kcache/compiler/backends.h>
#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/gpu_bench.h>
#include <kcache/compiler/worker_protocol.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <new>
#include <string_view>

namespace {

// `kcache-worker --toolchains`: the fingerprint of each backend built in.
int print_toolchains() {
  using namespace kcache::compiler;
  Toolchains toolchains;
  for (Backend b : {Backend::kCuda, Backend::kPtx, Backend::kLlvmIr, Backend::kCpp}) {
    if (auto backend = make_backend(b)) {
      toolchains.emplace(b, (*backend)->toolchain());
    }
  }
  std::cout << encode_toolchains(toolchains) << "\n";
  return std::cout.flush() ? 0 : 1;
}

// `kcache-worker --bench`: benchmarks autotune variants (bench_protocol.h).
int run_bench(const std::string& input) {
  using namespace kcache::compiler;
  auto request = decode_bench_request(input);
  if (!request) {
    std::cerr << "kcache-worker: " << request.error() << "\n";
    return 2;
  }
  if (request->device == "cuda") {
    run_gpu_bench(*request, stdout); // through the driver API, dlopen'ed
    return 0;
  }
  run_cpu_bench(*request, stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  using namespace kcache::compiler;
  if (argc == 2 && std::string_view(argv[1]) == "--toolchains") {
    return print_toolchains();
  }
  const bool bench = argc == 2 && std::string_view(argv[1]) == "--bench";
  if (argc != 1 && !bench) {
    std::cerr << "usage: kcache-worker [--toolchains | --bench] < request > outcome\n"
                 "  Compiles one CompileSpec read from stdin (run by kcached), or with\n"
                 "  --bench benchmarks autotune variants (bench_protocol.h).\n";
    return 2;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  if (bench) {
    return run_bench(input);
  }
  kcache::cachekey::ToolchainFingerprint toolchain;
  CompileOutcome outcome = tl::unexpected(CompileError{});
  auto spec = spec_from_json(input);
  if (!spec) {
    outcome = tl::unexpected(CompileError{CompileError::Code::kInvalidSpec, spec.error(), {}});
  } else if (auto backend = make_backend(spec->backend); !backend) {
    outcome = tl::unexpected(backend.error());
  } else {
    toolchain = (*backend)->toolchain();
    try {
      outcome = (*backend)->compile(*spec);
    } catch (const std::bad_alloc&) {
      // Under RLIMIT_AS an allocation fails before the kernel kills us.
      outcome = tl::unexpected(CompileError{CompileError::Code::kCompileFailed,
                                            "the compiler ran out of memory (worker memory limit)",
                                            {}});
    }
  }
  const std::string reply = encode_worker_outcome(outcome, toolchain);
  std::fwrite(reply.data(), 1, reply.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
