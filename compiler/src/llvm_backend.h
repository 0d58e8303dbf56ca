#pragma once
// LLVM 19 IR (text or bitcode) -> an optimized native object for a target CPU
// (output kObject, target "x86-64-v3", "znver4", "native"...), or -> PTX
// through the NVPTX target (output kPtx, target "sm_90a"). In process.
//
// Options: -O0..-O3 (default -O3), -mattr=+avx2,-avx512f (CPU features),
// -ffast-math. Anything else is refused, so no flag is silently ignored.

#include <kcache/compiler/backend.h>

namespace llvm {
class Module;
}

namespace kcache::compiler {

class LlvmBackend final : public CompilerBackend {
public:
  Backend kind() const override { return Backend::kLlvmIr; }
  cachekey::ToolchainFingerprint toolchain() const override;
  CompileOutcome compile(const CompileSpec& spec) const override;
};

// Shared with the C++ backend: optimizes and emits a parsed module.
CompileOutcome emit_module(llvm::Module& module, const CompileSpec& spec,
                           std::chrono::steady_clock::time_point start, std::string log);

} // namespace kcache::compiler
