// kcache-worker: compiles one CompileSpec read from stdin and writes the
// outcome to stdout (worker_protocol.h). One process per job, started by
// WorkerRunner with CPU-time and memory limits: a compiler that crashes,
// loops or eats memory takes down this process only.

#include <kcache/compiler/backends.h>
#include <kcache/compiler/worker_protocol.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <new>

int main() {
  using namespace kcache::compiler;
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
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
