#include <kcache/compiler/backends.h>

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <vector>

namespace kcache::compiler {

HostTarget detect_host_target() {
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
}

} // namespace kcache::compiler
