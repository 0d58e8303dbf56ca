#pragma once
// A compiler backend: compile(spec) -> binary and log, or an error with the
// compiler's diagnostic. Backends run inside kcache-worker processes, never in
// the daemon: a compiler crash takes down one worker, not the service.

#include <kcache/compiler/compile_spec.h>

#include <tl/expected.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kcache::compiler {

struct CompileResult {
  OutputKind kind = OutputKind::kCubin;
  std::string binary;                               // CUBIN, PTX text, or ELF object
  std::map<std::string, std::string> lowered_names; // name expression -> symbol
  std::string log;                                  // warnings, even on success
  std::chrono::microseconds duration{0};
};

struct CompileError {
  enum class Code {
    kInvalidSpec,   // the spec asks for something this backend cannot do
    kCompileFailed, // the compiler rejected the source: `log` says why
    kUnavailable,   // the toolchain is not installed here
    kInternal,      // the toolchain failed in an unexpected way
    kCancelled,     // the job was cancelled while compiling
    // The worker hit its memory, CPU-time or wall-clock limit: says nothing
    // about the source, so it is never cached as a failure of it.
    kResourceLimit,
  };
  Code code = Code::kInternal;
  std::string message;
  std::string log;
};

using CompileOutcome = tl::expected<CompileResult, CompileError>;

class CompilerBackend {
public:
  virtual ~CompilerBackend() = default;
  virtual Backend kind() const = 0;
  // Versions of everything that decides this backend's output.
  virtual cachekey::ToolchainFingerprint toolchain() const = 0;
  // Where the toolchain lives outside the system directories (a CUDA Toolkit
  // under /opt): a confined worker may read there.
  virtual std::vector<std::string> toolchain_dirs() const { return {}; }
  virtual CompileOutcome compile(const CompileSpec& spec) const = 0;
};

} // namespace kcache::compiler
