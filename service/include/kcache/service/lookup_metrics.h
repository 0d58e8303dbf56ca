#pragma once
// Cache lookups (artifact and action-record reads) counted by namespace and
// cache kind, for /metrics: kcache_lookup_hits_total and
// kcache_lookup_misses_total {namespace, kind}. The store's own counters say
// how each tier does; these say whose lookups hit and of what (FX graphs,
// AOT autograd, autotune results, Triton kernels, the service's compiles).
//
// Label cardinality is bounded: the first kMaxNamespaces namespaces seen get
// their own label value, later ones share "(other)" (namespaces are
// [A-Za-z0-9._-], so neither that nor "(none)", for keys of no namespace,
// can be a real one). A lookup takes a shared lock and allocates nothing once
// its (namespace, kind) has been seen.

#include <kcache/service/metrics.h>

#include <array>
#include <cstddef>
#include <map>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace kcache::service {

enum class CacheKind : std::uint8_t { kFxGraph, kAot, kAutotune, kTriton, kCompile, kOther };
inline constexpr std::size_t kCacheKinds = 6;
std::string_view cache_kind_name(CacheKind kind);

// From how keys are named: kcc-<hex> is the service's compile path,
// triton:<ns>:... kcache.torch's Triton files, torch:<ns>:pt2:<cache id>::...
// Inductor's remote caches (fx-graph-v1, autograd-*, autotune-*,
// bundled-autotune-*); anything else is kOther.
CacheKind cache_kind(std::string_view key);

class LookupMetrics {
public:
  static constexpr std::size_t kMaxNamespaces = 64;

  explicit LookupMetrics(MetricsRegistry& metrics) : metrics_(metrics) {}
  void record(std::string_view key, bool hit);

private:
  struct Row {
    std::array<Counter*, kCacheKinds> hits{};
    std::array<Counter*, kCacheKinds> misses{};
  };
  Counter& create(const std::string& ns, CacheKind kind, bool hit);

  MetricsRegistry& metrics_;
  std::shared_mutex mu_;
  std::map<std::string, Row, std::less<>> rows_; // by namespace label value
};

} // namespace kcache::service
