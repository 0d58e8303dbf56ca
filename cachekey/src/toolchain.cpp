#include <kcache/cachekey/canonical_writer.h>
#include <kcache/cachekey/toolchain.h>

namespace kcache::cachekey {

ToolchainFingerprint& ToolchainFingerprint::add(std::string component, std::string version) {
  components_[std::move(component)] = std::move(version);
  return *this;
}

Digest ToolchainFingerprint::digest() const {
  CanonicalWriter w;
  w.tag("toolchain").list(components_.size());
  for (const auto& [component, version] : components_) {
    w.str(component).str(version);
  }
  return w.sha256();
}

} // namespace kcache::cachekey
