// kcache-worker: compiles one CompileSpec read from stdin and writes the
// outcome to stdout (worker_protocol.h). One process per job, started by
// WorkerRunner with CPU-time and memory limits: a compiler that crashes,
// loops or eats memory takes down this process only.

#include "cpu_bench.h"

#include <kcache/compiler/backends.h>
#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/gpu_bench.h>
#include <kcache/compiler/spec_check.h>
#include <kcache/compiler/worker_protocol.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
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

// Makes a fresh empty directory the working directory for this process's
// life, and removes it at exit (lld links in a temporary directory of its own).
class EmptyWorkingDirectory {
public:
  EmptyWorkingDirectory() {
    std::error_code ec;
    std::string pattern =
        (std::filesystem::temp_directory_path(ec) / "kcache-worker-XXXXXX").string();
    if (!ec && ::mkdtemp(pattern.data()) != nullptr && ::chdir(pattern.c_str()) == 0) {
      path_ = pattern;
    }
  }
  ~EmptyWorkingDirectory() {
    if (!path_.empty() && ::chdir("/") == 0) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  EmptyWorkingDirectory(const EmptyWorkingDirectory&) = delete;
  EmptyWorkingDirectory& operator=(const EmptyWorkingDirectory&) = delete;

private:
  std::string path_;
};

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
  if (argc == 2 && std::string_view(argv[1]) == "--host-target") {
    std::cout << encode_host_target(detect_host_target()) << "\n";
    return std::cout.flush() ? 0 : 1;
  }
  const bool bench = argc == 2 && std::string_view(argv[1]) == "--bench";
  if (argc != 1 && !bench) {
    std::cerr
        << "usage: kcache-worker [--toolchains | --host-target | --bench] < request > outcome\n"
           "  Compiles one CompileSpec read from stdin (run by kcached), or with\n"
           "  --bench benchmarks autotune variants (bench_protocol.h).\n";
    return 2;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  if (bench) {
    return run_bench(input);
  }
  // Compilers resolve relative names against the working directory (NVRTC
  // searches the source's directory): an empty one of our own holds nothing.
  const EmptyWorkingDirectory scratch;
  CompileOutcome outcome = tl::unexpected(CompileError{});
  // The worker checks the spec again: it is what reads files, whoever sent it.
  auto spec = spec_from_json(input).and_then([](const CompileSpec& s) { return prepare_spec(s); });
  if (!spec) {
    outcome = tl::unexpected(CompileError{CompileError::Code::kInvalidSpec, spec.error(), {}});
  } else if (auto backend = make_backend(spec->backend); !backend) {
    outcome = tl::unexpected(backend.error());
  } else {
    try {
      outcome = (*backend)->compile(*spec);
    } catch (const std::bad_alloc&) {
      // Under RLIMIT_AS an allocation fails before the kernel kills us; the
      // runner adds the limit, peak RSS and times.
      outcome = tl::unexpected(CompileError{CompileError::Code::kResourceLimit,
                                            "the compiler ran out of memory (std::bad_alloc)",
                                            {}});
    }
  }
  // Logs leave the worker as valid UTF-8 without NULs, and a failure's
  // message names the first diagnostic.
  if (outcome) {
    outcome->log = clean_log(outcome->log);
  } else {
    outcome = tl::unexpected(tidy_error(std::move(outcome.error())));
  }
  // No fingerprint with the outcome: computing one walks the system include
  // trees, and kcached records the fingerprint it keyed the compile with.
  const std::string reply = encode_worker_outcome(outcome, {});
  std::fwrite(reply.data(), 1, reply.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
