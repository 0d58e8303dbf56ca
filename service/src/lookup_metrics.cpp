#include <kcache/service/key_namespace.h>
#include <kcache/service/lookup_metrics.h>

#include <mutex>

namespace kcache::service {

namespace {

constexpr std::string_view kOtherNamespace = "(other)";
constexpr std::string_view kNoNamespace = "(none)";

// Inductor's cache id in "pt2:<cache id>::<key>:c<version>".
CacheKind inductor_kind(std::string_view remote_key) {
  if (!remote_key.starts_with("pt2:")) {
    return CacheKind::kOther;
  }
  const std::string_view id = remote_key.substr(4, remote_key.find("::") - 4);
  if (id.starts_with("fx-graph")) {
    return CacheKind::kFxGraph;
  }
  if (id.find("autograd") != std::string_view::npos || id.starts_with("aot")) {
    return CacheKind::kAot;
  }
  if (id.find("autotune") != std::string_view::npos) {
    return CacheKind::kAutotune;
  }
  return CacheKind::kOther;
}

} // namespace

std::string_view cache_kind_name(CacheKind kind) {
  switch (kind) {
  case CacheKind::kFxGraph:
    return "fx-graph";
  case CacheKind::kAot:
    return "aot";
  case CacheKind::kAutotune:
    return "autotune";
  case CacheKind::kTriton:
    return "triton";
  case CacheKind::kCompile:
    return "compile";
  case CacheKind::kOther:
    break;
  }
  return "other";
}

CacheKind cache_kind(std::string_view key) {
  if (key.starts_with("kcc-")) {
    return CacheKind::kCompile;
  }
  if (key.starts_with("triton:")) {
    return CacheKind::kTriton;
  }
  if (key.starts_with("torch:")) {
    const auto second = key.find(':', 6);
    return second == std::string_view::npos ? CacheKind::kOther
                                            : inductor_kind(key.substr(second + 1));
  }
  return CacheKind::kOther;
}

void LookupMetrics::record(std::string_view key, bool hit) {
  const KeyScope scope = key_scope(key);
  const std::string_view ns =
      scope.kind == KeyScope::Kind::kNamed && !scope.ns.empty() ? scope.ns : kNoNamespace;
  const CacheKind kind = cache_kind(key);
  const auto slot = static_cast<std::size_t>(kind);
  {
    std::shared_lock lock(mu_);
    auto it = rows_.find(ns);
    if (it == rows_.end() && rows_.size() >= kMaxNamespaces) {
      it = rows_.find(kOtherNamespace);
    }
    if (it != rows_.end()) {
      if (Counter* c = (hit ? it->second.hits : it->second.misses)[slot]) {
        c->inc();
        return;
      }
    }
  }
  create(std::string(ns), kind, hit).inc();
}

Counter& LookupMetrics::create(const std::string& ns, CacheKind kind, bool hit) {
  std::unique_lock lock(mu_);
  // "(other)" is the 65th row: it does not count against the cap.
  const bool fits = rows_.contains(ns) || rows_.size() < kMaxNamespaces;
  Row& row = rows_[fits ? ns : std::string(kOtherNamespace)];
  Counter*& slot = (hit ? row.hits : row.misses)[static_cast<std::size_t>(kind)];
  if (slot == nullptr) {
    slot = &metrics_.counter(hit ? "kcache_lookup_hits_total" : "kcache_lookup_misses_total",
                             hit ? "Cache lookups that hit, by namespace and cache kind"
                                 : "Cache lookups that missed, by namespace and cache kind",
                             {{"namespace", fits ? ns : std::string(kOtherNamespace)},
                              {"kind", std::string(cache_kind_name(kind))}});
  }
  return *slot;
}

} // namespace kcache::service
