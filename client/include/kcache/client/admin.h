#pragma once
// The inspection and maintenance side of libkcache: what stats, list, entry,
// verify, gc and jobs ask for. The answers are protocol/admin.h's types, read
// by the same code kcached renders them with.

#include <kcache/protocol/admin.h>
#include <kcache/protocol/job.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kcache::client {

using protocol::Entry;
using protocol::EntryList;
using protocol::EntrySummary;
using protocol::GcReport;
using protocol::JobList;
using protocol::NodeList;
using protocol::Stats;
using protocol::VerifyReport;

// GET /v1/entries. Empty strings and an unset limit leave the daemon's
// defaults (both areas, no prefix, most recently accessed first, 1000).
struct ListQuery {
  std::string area;   // "ac", "cas" or empty
  std::string prefix; // keys that start with it
  std::string sort;   // size, last_access, hits, created or key
  std::optional<std::size_t> limit;
};

// POST /v1/admin/verify: one area, optionally one key prefix of it.
struct VerifyQuery {
  std::string area = "cas"; // "ac" or "cas"
  std::string prefix;
  bool repair = false; // drop what fails (a corrupt blob, a record missing blobs)
};

// POST /v1/admin/gc: least recently used entries go until the store fits.
// At least one of the two; with both, the age goes first.
struct GcQuery {
  std::optional<std::uint64_t> max_size;     // bytes: least recently used go first
  std::optional<std::uint64_t> older_than_s; // entries not accessed for this long go
};

// GET /v1/jobs: newest first.
struct JobsQuery {
  std::optional<std::size_t> limit;        // the daemon's default: 100
  std::optional<protocol::JobState> state; // only jobs in this state
  // Long-poll: the daemon answers once a job changed after `since` (the
  // `changes` of an earlier answer), or when `wait` ends; at once without it.
  std::optional<std::uint64_t> since{};
  std::chrono::milliseconds wait{0};
  bool logs = true; // false: each job without its compiler log (?log=0)
};

} // namespace kcache::client
