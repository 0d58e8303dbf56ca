#pragma once
// C++ CPU kernels -> native object through clang's libraries, in process (no
// compiler subprocess). The clang driver works out the cc1 arguments (system
// and libstdc++ headers, target), the frontend emits LLVM IR from the in-memory
// source, and the same optimization and code generation as the LLVM backend
// produce the object.
//
// Target: a CPU name ("x86-64-v3", "znver4", "native"). Options go to the
// driver (-std=c++20, -DNAME=V, -O3, -ffast-math, -fno-exceptions, ...).

#include <kcache/compiler/backend.h>

namespace kcache::compiler {

class CppBackend final : public CompilerBackend {
public:
  Backend kind() const override { return Backend::kCpp; }
  cachekey::ToolchainFingerprint toolchain() const override;
  CompileOutcome compile(const CompileSpec& spec) const override;
};

} // namespace kcache::compiler
