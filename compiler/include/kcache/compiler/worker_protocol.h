#pragma once
// The kcache-worker protocol: the worker reads one CompileSpec (JSON) from
// stdin and writes one outcome to stdout as a parts body:
//   "outcome"  JSON: ok, error code and message, lowered names, duration, toolchain
//   "binary"   the compiled bytes (empty on failure)
//   "log"      the compiler's log

#include <kcache/cachekey/toolchain.h>
#include <kcache/compiler/backend.h>

#include <string>
#include <string_view>

namespace kcache::compiler {

struct WorkerOutcome {
  CompileOutcome outcome;
  std::map<std::string, std::string> toolchain;
};

std::string encode_worker_outcome(const CompileOutcome& outcome,
                                  const cachekey::ToolchainFingerprint& toolchain);
// A reply that does not decode is itself an error (kInternal).
WorkerOutcome decode_worker_outcome(std::string_view bytes);

std::string_view error_code_name(CompileError::Code code);

} // namespace kcache::compiler
