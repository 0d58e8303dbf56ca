#pragma once
// A compile job as the wire shows it: kcached renders jobs with to_json
// (listings, long-polls, submit answers, its journal) and clients read them
// back with job_from_json, so the two sides cannot drift apart.

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::protocol {

// Each enum has one name table (job.cpp): the names in job JSON, in the
// journal and in requests are read and written through it.
enum class JobKind {
  kCompile,  // one spec, one worker run
  kAutotune, // a search: compiles its variants as child jobs, then benchmarks them
};
std::string_view job_kind_name(JobKind kind);
tl::expected<JobKind, std::string> parse_job_kind(std::string_view name);

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view job_state_name(JobState state);
tl::expected<JobState, std::string> parse_job_state(std::string_view name);
inline bool is_finished(JobState s) {
  return s != JobState::kQueued && s != JobState::kRunning;
}

// Why a job failed. The first six are the worker's (compiler::CompileError,
// same names); the rest are the service's own.
enum class JobError {
  kNone,
  kInvalidSpec,    // the spec asks for something the backend cannot do
  kCompileFailed,  // the compiler rejected the source
  kUnavailable,    // the toolchain is not installed where the worker runs
  kInternal,       // the machinery failed (or the daemon restarted too often)
  kCancelled,      // by the user
  kResourceLimit,  // memory, CPU time or wall clock ran out
  kStore,          // compiled, but storing the result failed
  kAutotuneFailed, // no variant ran correctly, or the reference did not compile
  kInfrastructure, // the worker was killed or spoke garbage on every attempt (never cached)
};
std::string_view job_error_name(JobError error); // "" for kNone
tl::expected<JobError, std::string> parse_job_error(std::string_view name);
// Failures of the compile itself are remembered (the negative cache); those
// of the machinery, a cancel or a resource limit are not: a compile killed
// for memory or time may pass on a quieter node or with higher limits.
inline bool is_cacheable_failure(JobError e) {
  return e == JobError::kCompileFailed || e == JobError::kInvalidSpec;
}

// Every field a job's JSON carries.
struct JobView {
  std::string id; // "j-" + 16 hex digits
  JobKind kind = JobKind::kCompile;
  std::vector<std::string> parents; // autotune jobs waiting for this compile
  std::string compile_key;          // "kcc-<sha256>"
  std::vector<std::string> keys;    // where the result is published (the compile key included)
  std::string spec_json;            // the CompileSpec, as checked and made canonical
  std::string backend, target, entry, output; // from the spec, for listings
  int priority = 0;                           // higher runs first
  JobState state = JobState::kQueued;
  std::int64_t submitted_ms = 0, started_ms = 0, finished_ms = 0;
  std::uint32_t attempts = 0;            // times a worker started it (a restart may repeat one)
  std::uint32_t submissions = 1;         // submissions that joined this job
  JobError error_code = JobError::kNone; // on failure
  std::string error_message;
  std::string log; // the compiler's log (tail), success or failure
  std::uint64_t output_size = 0;
  std::int64_t compile_ms = 0;
  // Autotune: the hardware the variants are timed on, and progress in
  // variant steps (each compiled, then each benchmarked).
  std::string tuning_class;
  std::size_t progress_done = 0, progress_total = 0;
  // Cluster mode: why a queued job is not taken (no live node serves its
  // capability), as "waiting for <what>"; empty when nothing is missing.
  // Absent from the JSON when empty.
  std::string waiting_for;
  // kc1- client keys' manifests (JSON text, as submitted): the record stored
  // under such a key carries it, so it is in the manifest's namespace. In the
  // journal and the cluster queue only (with_spec), as the spec is.
  std::map<std::string, std::string> manifests;

  bool finished() const { return is_finished(state); }
};

// What a submit answer says about where this submission's result goes
// (issue 14): the keys it is published under, and, when the client's key is
// not among them (the token may not write there), why.
struct Publication {
  std::vector<std::string> published_under;
  std::string client_key_refused; // "": the client's key is used, or none was given
};
// Adds "published_under" (when known) and "client_key_refused" (when set) to a submit answer.
void add_publication(nlohmann::json& answer, const Publication& publication);
// From a submit answer; members absent or of the wrong type read as empty.
Publication publication_from_json(const nlohmann::json& answer);

// with_spec: the journal keeps the spec; listings leave it out.
nlohmann::json to_json(const JobView& job, bool with_spec);
// From a parsed document (a listing's row, a submit answer's "job").
tl::expected<JobView, std::string> job_from_json(const nlohmann::json& doc);
// From text: parsed with parse_json's depth bound.
tl::expected<JobView, std::string> job_from_json_text(std::string_view text);

} // namespace kcache::protocol
