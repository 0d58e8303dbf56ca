#pragma once
// Toolchain fingerprint: the versions of everything that turns a graph into a
// binary (NVRTC, LLVM, kcache's codegen, a client's torch/triton build hash).

#include <kcache/cachekey/sha256.h>

#include <map>
#include <string>

namespace kcache::cachekey {

// Bumped whenever kcache's own code generation changes its output.
inline constexpr std::string_view kKcacheCodegenVersion = "kcache-codegen/1";

class ToolchainFingerprint {
public:
  // Later calls for one component replace the earlier version.
  ToolchainFingerprint& add(std::string component, std::string version);
  const std::map<std::string, std::string>& components() const { return components_; }
  Digest digest() const;

private:
  std::map<std::string, std::string> components_;
};

} // namespace kcache::cachekey
