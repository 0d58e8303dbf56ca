#pragma once
// The inspection and maintenance answers as the wire shows them: kcached
// renders GET /v1/stats, /v1/entries, /v1/entries/{key}, POST /v1/admin/verify
// and /v1/admin/gc with to_json, clients (the CLI, the C ABI) read them back
// with the *_from_json functions, so the two sides cannot drift apart.
//
// Readers are tolerant of members they do not know (a newer kcached may add
// some) and of absent ones (defaults), but strict on types: a member present
// with the wrong type is an error, never a silent zero.

#include <kcache/protocol/job.h>

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kcache::protocol {

// GET /v1/stats: one storage tier's counters.
struct TierStats {
  std::string name;
  std::uint64_t hits = 0, misses = 0, errors = 0, corrupt = 0, evictions = 0, puts = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0, backfills = 0, rejected = 0;
  // What the tier holds now; null in JSON where it cannot say (Redis).
  std::optional<std::uint64_t> bytes_stored, capacity, entries;
};

// GET /v1/stats: the lookups of the whole stack, then each tier. Counters
// count from start-up or the last POST /v1/stats/zero (zeroed_ms, 0: never).
struct Stats {
  double uptime_s = 0;
  std::uint64_t hits = 0, misses = 0, errors = 0;
  std::optional<double> hit_ratio; // hits / (hits + misses); null before any lookup
  std::int64_t zeroed_ms = 0;      // unix ms
  std::string version, git_revision;
  std::uint32_t key_schema = 0, c_abi = 0;
  bool cluster = false; // started with --cluster: GET /v1/nodes lists the nodes
  std::vector<TierStats> tiers;
};

// One stored object as a listing shows it (also an entry's "storage").
struct EntrySummary {
  std::string area; // "ac" or "cas"
  std::string key;
  std::uint64_t size = 0; // bytes stored (framed, compressed): what gc frees
  std::int64_t created_ms = 0, last_access_ms = 0;
  std::uint64_t hits = 0;
  // An action record's outputs together (what a hit hands out); listings fill
  // it for the entries they return. Unset for CAS blobs and unreadable records.
  std::optional<std::uint64_t> artifact_size;
};

// GET /v1/entries: the first `limit` entries and how many matched.
struct EntryList {
  std::vector<EntrySummary> entries;
  std::uint64_t total = 0;
  // The total is the stores' entry count, not a count of the listing (a
  // sorted page served from an order index over several tiers).
  bool total_estimated = false;
};

struct EntryOutput {
  std::string name;
  std::string digest; // sha256 hex: the blob's CAS key
  std::uint64_t size = 0;
};

// GET /v1/entries/{key}: an action record, its blobs, and where it is stored.
struct Entry {
  std::string key;
  std::vector<EntryOutput> outputs;
  std::string producer;
  std::int64_t created_ms = 0;
  std::map<std::string, std::string> metadata;
  std::string manifest_json; // the key manifest as JSON text; empty: none
  std::optional<EntrySummary> storage;
};

struct VerifyProblem {
  std::string key;
  std::string problem;
};

// POST /v1/admin/verify: one area (and prefix) re-hashed.
struct VerifyReport {
  std::string area;
  std::uint64_t checked = 0;
  std::vector<VerifyProblem> problems;
  std::uint64_t repaired = 0;
};

// POST /v1/admin/gc.
struct GcReport {
  std::uint64_t before_bytes = 0, after_bytes = 0;
  std::uint64_t removed_entries = 0, removed_bytes = 0;
};

// GET /v1/jobs: recent jobs (without their specs) and the queue's counts.
struct JobList {
  struct Counts {
    std::size_t queued = 0, running = 0, finished = 0;
    std::size_t workers = 0, queue_capacity = 0;
  };
  std::vector<JobView> jobs;
  Counts counts;
  // The job manager's change count (the dashboard long-polls on it); absent
  // from an older daemon's answer.
  std::optional<std::uint64_t> changes;
};

// GET /v1/nodes (cluster mode): the live nodes, as each last heartbeated.
struct NodeView {
  std::string id;
  std::string version;
  std::string address; // its listen address
  // The job streams it serves (service/job_capability.h): "<backend>/<target
  // class>" for compiles ("cpp/x86_64", "cuda/cuda"), "autotune/<backend>/<tuning
  // class>" for searches.
  std::vector<std::string> capabilities;
  std::uint64_t workers = 0, queued = 0, running = 0;
  std::int64_t started_ms = 0;   // unix ms
  std::int64_t heartbeat_ms = 0; // unix ms of its last heartbeat
};
struct NodeList {
  std::vector<NodeView> nodes;
};

nlohmann::json to_json(const Stats& stats);
nlohmann::json to_json(const EntrySummary& entry);
nlohmann::json to_json(const EntryList& list);
// Fails only when manifest_json is not JSON.
tl::expected<nlohmann::json, std::string> to_json(const Entry& entry);
nlohmann::json to_json(const VerifyReport& report);
nlohmann::json to_json(const GcReport& report);
nlohmann::json to_json(const JobList& list);
nlohmann::json to_json(const NodeList& list);

tl::expected<Stats, std::string> stats_from_json(const nlohmann::json& doc);
tl::expected<EntrySummary, std::string> entry_summary_from_json(const nlohmann::json& doc);
tl::expected<EntryList, std::string> entry_list_from_json(const nlohmann::json& doc);
tl::expected<Entry, std::string> entry_from_json(const nlohmann::json& doc);
tl::expected<VerifyReport, std::string> verify_report_from_json(const nlohmann::json& doc);
tl::expected<GcReport, std::string> gc_report_from_json(const nlohmann::json& doc);
tl::expected<JobList, std::string> job_list_from_json(const nlohmann::json& doc);
tl::expected<NodeList, std::string> node_list_from_json(const nlohmann::json& doc);

} // namespace kcache::protocol
