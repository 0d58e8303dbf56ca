#pragma once
// CUDA C++ -> CUBIN (target "sm_XX[a]") or PTX (target "compute_XX[a]" or
// output kPtx) with NVRTC, in process.

#include <kcache/compiler/backend.h>

namespace kcache::compiler {

class NvrtcBackend final : public CompilerBackend {
public:
  Backend kind() const override { return Backend::kCuda; }
  cachekey::ToolchainFingerprint toolchain() const override;
  std::vector<std::string> toolchain_dirs() const override;
  CompileOutcome compile(const CompileSpec& spec) const override;
};

} // namespace kcache::compiler
