#pragma once
// PTX -> CUBIN for a real architecture ("sm_90a") with nvJitLink, in process.

#include <kcache/compiler/backend.h>

namespace kcache::compiler {

class NvJitLinkBackend final : public CompilerBackend {
public:
  Backend kind() const override { return Backend::kPtx; }
  cachekey::ToolchainFingerprint toolchain() const override;
  std::vector<std::string> toolchain_dirs() const override;
  CompileOutcome compile(const CompileSpec& spec) const override;
};

} // namespace kcache::compiler
