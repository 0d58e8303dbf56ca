// kcache-worker: compiles one CompileSpec read from stdin and writes the
// outcome to stdout (worker_protocol.h). One process per job, started by
// WorkerRunner with CPU-time and memory limits: a compiler that crashes,
// loops or eats memory takes down this process only.

#include "bench_serve.h"

#include <kcache/compiler/backends.h>
#include <kcache/compiler/bench_protocol.h>
#include <kcache/compiler/diagnostics.h>
#include <kcache/compiler/gpu_bench.h>
#include <kcache/compiler/sandbox.h>
#include <kcache/compiler/spec_check.h>
#include <kcache/compiler/worker_protocol.h>

#include <unistd.h>

#include <charconv>
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

// The compile's scratch directory: the one given by WorkerRunner (which
// removes it, even after a crash), or a fresh one of our own, removed at exit.
class ScratchDirectory {
public:
  explicit ScratchDirectory(std::string given) : path_(std::move(given)) {
    if (path_.empty()) {
      std::error_code ec;
      std::string pattern =
          (std::filesystem::temp_directory_path(ec) / "kcache-worker-XXXXXX").string();
      if (!ec && ::mkdtemp(pattern.data()) != nullptr) {
        path_ = pattern;
        owned_ = true;
      }
    }
  }
  ~ScratchDirectory() {
    if (owned_ && ::chdir("/") == 0) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
  bool owned_ = false;
};

// Before a compile: the scratch directory becomes the working and temporary
// directory (compilers resolve relative names against the first; lld links
// in the second), and Landlock confines the process to reading the system's
// and the toolchain's files and writing the scratch directory only.
void enter_sandbox(const ScratchDirectory& scratch,
                   const kcache::compiler::CompilerBackend& backend) {
  using namespace kcache::compiler;
  if (scratch.path().empty() || ::chdir(scratch.path().c_str()) != 0 ||
      ::setenv("TMPDIR", scratch.path().c_str(), 1) != 0) {
    std::cerr << "kcache-worker: no scratch directory; compiling unconfined\n";
    return;
  }
  SandboxPolicy policy;
  policy.read_paths = system_read_paths();
  for (std::string& dir : backend.toolchain_dirs()) {
    policy.read_paths.push_back(std::move(dir));
  }
  policy.write_paths = {scratch.path(), "/dev/null"};
  if (auto confined = confine_filesystem(policy); !confined) {
    // The spec checks still hold; kcached says at start that workers run
    // unconfined (kcache-worker --sandbox).
    std::cerr << "kcache-worker: " << confined.error() << "; compiling unconfined\n";
  }
}

// `kcache-worker --sandbox`: whether compiles here are confined by Landlock.
int print_sandbox() {
  if (auto abi = kcache::compiler::landlock_abi()) {
    std::cout << "landlock " << *abi << "\n";
    return 0;
  } else {
    std::cout << abi.error() << "\n";
    return 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  using namespace kcache::compiler;
  if (argc == 2 && std::string_view(argv[1]) == "--toolchains") {
    return print_toolchains();
  }
  if (argc == 2 && std::string_view(argv[1]) == "--host-target") {
    const auto host = detect_host_target();
    if (!host) {
      std::cerr << "kcache-worker: " << host.error() << "\n";
      return 1;
    }
    std::cout << encode_host_target(*host) << "\n";
    return std::cout.flush() ? 0 : 1;
  }
  if (argc == 2 && std::string_view(argv[1]) == "--sandbox") {
    return print_sandbox();
  }
  if (argc >= 2 && std::string_view(argv[1]) == "--bench") {
    // --bench [--gpu N]: which GPU this worker times CUDA variants on.
    int gpu = 0;
    const std::string_view ordinal = argc == 4 ? argv[3] : "";
    const bool given = argc == 4 && std::string_view(argv[2]) == "--gpu" &&
                       std::from_chars(ordinal.data(), ordinal.data() + ordinal.size(), gpu).ptr ==
                           ordinal.data() + ordinal.size() &&
                       !ordinal.empty() && gpu >= 0;
    if (argc != 2 && !given) {
      std::cerr << "usage: kcache-worker --bench [--gpu N] < requests > results\n";
      return 2;
    }
    return serve_bench(gpu);
  }
  const bool scratch_given = argc == 3 && std::string_view(argv[1]) == "--scratch";
  if (argc != 1 && !scratch_given) {
    std::cerr << "usage: kcache-worker [--scratch DIR] < spec > outcome\n"
                 "       kcache-worker --bench [--gpu N] < requests > results\n"
                 "       kcache-worker --toolchains | --host-target | --sandbox\n"
                 "  Compiles one CompileSpec read from stdin in DIR (run by kcached), or\n"
                 "  with --bench benchmarks autotune variants, request after request\n"
                 "  (bench_protocol.h).\n";
    return 2;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const ScratchDirectory scratch(scratch_given ? argv[2] : "");
  CompileOutcome outcome = tl::unexpected(CompileError{});
  // The worker checks the spec again: it is what reads files, whoever sent it.
  auto spec = spec_from_json(input).and_then([](const CompileSpec& s) { return prepare_spec(s); });
  if (!spec) {
    outcome = tl::unexpected(CompileError{CompileError::Code::kInvalidSpec, spec.error(), {}});
  } else if (auto backend = make_backend(spec->backend); !backend) {
    outcome = tl::unexpected(backend.error());
  } else {
    enter_sandbox(scratch, **backend);
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
