#pragma once
// explain(a, b): why two key manifests give different keys. Names every
// differing component; for graphs, the first differing nodes: those whose
// digest is missing on the other side while all their inputs are present, i.e.
// where the change starts rather than everything downstream of it.

#include <kcache/cachekey/key_manifest.h>

#include <string>
#include <vector>

namespace kcache::cachekey {

struct ComponentDiff {
  std::string component; // "graph", "guards", "toolchain", ...
  std::string a;         // value (or summary) on side A
  std::string b;
  std::vector<std::string> details; // one line per finding
};

struct Explanation {
  std::string key_a;
  std::string key_b;
  std::vector<ComponentDiff> diffs; // empty iff the keys are equal
};

Explanation explain(const KeyManifest& a, const KeyManifest& b);
std::string to_text(const Explanation& explanation);

} // namespace kcache::cachekey
