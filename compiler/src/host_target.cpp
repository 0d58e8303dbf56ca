#include <kcache/compiler/backends.h>

#if KCACHE_HAVE_LLVM
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <vector>
#endif

namespace kcache::compiler {

tl::expected<HostTarget, std::string> detect_host_target() {
#if KCACHE_HAVE_LLVM
  HostTarget host;
  host.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures()) {
    features.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
  }
  // StringMap iterates in hash order: sort, so one host always says the same.
  std::sort(features.begin(), features.end(),
            [](const std::string& a, const std::string& b) { return a.substr(1) < b.substr(1); });
  for (const std::string& f : features) {
    host.features += (host.features.empty() ? "" : ",") + f;
  }
  return host;
#else
  // "native" is named as LLVM names CPUs; without LLVM there is nothing to
  // compile for it anyway.
  return tl::unexpected(std::string("no host target: this kcache-worker is the CUDA-only build "
                                    "(KCACHE_WITH_LLVM=OFF)"));
#endif
}

} // namespace kcache::compiler
