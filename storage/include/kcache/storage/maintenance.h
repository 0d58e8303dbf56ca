#pragma once
// Whole-store maintenance over the public Store API: re-hashing and repair
// (`kcache verify`, POST /v1/admin/verify) and size-bounded LRU collection
// (`kcache gc`, POST /v1/admin/gc). They walk a listing, so they work on any
// tier or stack of tiers; callers render the reports.

#include <kcache/storage/store.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kcache::storage {

struct VerifyOptions {
  Area area = Area::kCas;
  std::string prefix; // only keys starting with it
  // Delete what is found broken (a corrupt frame or an unparseable record is
  // deleted by the read itself, repair or not).
  bool repair = false;
};

struct VerifyProblem {
  std::string key;
  std::string problem; // for people: what is wrong and what was done
};

struct VerifyReport {
  Area area = Area::kCas;
  std::size_t checked = 0;
  std::vector<VerifyProblem> problems;
  std::size_t repaired = 0;
};

// CAS: every blob must hash to its key. Action cache: every record must parse
// and name only blobs present in the CAS. An error is a tier that could not
// answer; the walk stops there.
Result<VerifyReport> verify_entries(Store& store, const VerifyOptions& options);

struct GcReport {
  std::uint64_t before_bytes = 0;
  std::uint64_t after_bytes = 0;
  std::size_t removed_entries = 0;
  std::uint64_t removed_bytes = 0;
};

// Removes least recently accessed entries (both areas) until at most
// `max_bytes` remain, as the store reports sizes.
Result<GcReport> collect_garbage(Store& store, std::uint64_t max_bytes);

struct AgeGcOptions {
  // Entries last accessed (or, never read, created) longer ago than this go.
  std::chrono::milliseconds older_than{0};
  // The clock, unix ms; 0: now. Tests give their own.
  std::int64_t now_ms = 0;
};

// Age-based eviction (ccache's --evict-older-than): removes every entry
// whose last access is older than `older_than`. An entry whose tiers know
// neither its last access nor its creation (a Redis-only entry) stays: its
// tier's own TTL ages it out.
Result<GcReport> collect_older_than(Store& store, const AgeGcOptions& options);

} // namespace kcache::storage
