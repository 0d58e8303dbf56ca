#pragma once
// The kcache-worker protocol: the worker reads one CompileSpec (JSON) from
// stdin and writes one outcome to stdout as a parts body:
//   "outcome"  JSON: ok, error code and message, lowered names, duration, toolchain
//   "binary"   the compiled bytes (empty on failure)
//   "log"      the compiler's log
//
// `kcache-worker --toolchains` prints the fingerprint of every backend built
// into it as JSON ({"cuda": {"nvrtc": "13.0"}, ...}): kcached links no compiler,
// so this is how it learns what keys a compile.

#include <kcache/cachekey/toolchain.h>
#include <kcache/compiler/backend.h>

#include <string>
#include <string_view>

namespace kcache::compiler {

// How a kcache-worker run ended, as the runner saw the process, apart from
// what the compile said: kcached decides between retrying (the machinery
// failed) and failing the job (the spec did) from this, never from a message.
enum class WorkerExit {
  kCompleted,      // replied with a result
  kCompileError,   // replied with the spec's failure (invalid, does not compile, no backend)
  kInternalError,  // replied with its own failure ("internal": no scratch dir, NVRTC's state)
  kTimedOut,       // hit the wall-clock or CPU-time limit
  kMemoryLimit,    // hit the memory limit (or died of it near the limit)
  kKilledBySignal, // died by a signal no limit explains (the OOM killer, kill -9, a crash)
  kProtocolError,  // exited without a reply, or replied with bytes that do not decode
  kSpawnFailed,    // could not be started (pipe, fork)
  kExecFailed,     // the binary could not be executed (exit status 127, no reply)
  kCancelled,      // killed because the job was cancelled
};

std::string_view worker_exit_name(WorkerExit exit);

struct WorkerOutcome {
  CompileOutcome outcome;
  std::map<std::string, std::string> toolchain;
  WorkerExit exit = WorkerExit::kCompleted;
};

std::string encode_worker_outcome(const CompileOutcome& outcome,
                                  const cachekey::ToolchainFingerprint& toolchain);
// A reply that does not decode is itself an error (kInternal, exit
// kProtocolError); a decoded error is kCompileError, or kInternalError for the
// code "internal".
WorkerOutcome decode_worker_outcome(std::string_view bytes);

std::string_view error_code_name(CompileError::Code code);

// `kcache-worker --host-target`: this host's CPU as the worker's LLVM names it
// ({"cpu": "sapphirerapids", "features": "+avx2,+fma,-amx-tile,..."}), so a
// spec for target "native" is keyed by what the compiler would really use.
struct HostTarget {
  std::string cpu;
  std::string features; // comma-separated, sorted, as -mattr= takes them
};
std::string encode_host_target(const HostTarget& host);
tl::expected<HostTarget, std::string> decode_host_target(std::string_view text);

using Toolchains = std::map<Backend, cachekey::ToolchainFingerprint>;
std::string encode_toolchains(const Toolchains& toolchains);
tl::expected<Toolchains, std::string> decode_toolchains(std::string_view text);

} // namespace kcache::compiler
