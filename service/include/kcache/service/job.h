#pragma once
// A compile job as kcached tracks, journals and reports it.
//
// Jobs are single-flight by compile key ("kcc-<sha256>" of the spec and the
// toolchain that compiles it): any number of submissions of one spec share one
// job, and each submission's client key is added to the keys the result is
// published under.

#include <kcache/protocol/job.h>

#include <nlohmann/json_fwd.hpp>
#include <tl/expected.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kcache::service {

// The kinds, states, error codes and their names are the wire's (protocol/job.h).
using protocol::is_cacheable_failure;
using protocol::is_finished;
using protocol::job_error_name;
using protocol::job_kind_name;
using protocol::job_state_name;
using protocol::JobError;
using protocol::JobKind;
using protocol::JobState;
using protocol::parse_job_error;
using protocol::parse_job_kind;
using protocol::parse_job_state;

// How much of a compiler's log a job keeps: its tail (compiler::log_tail cuts
// at a line or character boundary, so the log stays valid UTF-8), in the job
// table, the journal and the cluster queue alike.
inline constexpr std::size_t kJobLogTail = 8000;

// What the wire shows of a job, and what only kcached keeps.
struct Job : protocol::JobView {
  // SHA-256 of the spec: failures are remembered by it. Journaled (as
  // "spec_digest", next to the spec): a finished job keeps it, not its spec.
  std::string spec_digest;
  // Whose quota the job counts against (journaled as "submitter").
  std::string submitter;
};

// A job looked up by id. In cluster mode a job another node queued lives in
// Redis, and Redis not answering is not "no such job": that is `unavailable`
// (HTTP 503, retried by the client), never an empty `job` (404).
struct JobLookup {
  JobLookup() = default;
  // Implicit: a found job, or none, is what a local lookup always is.
  JobLookup(Job found) : job(std::move(found)) {}
  JobLookup(std::optional<Job> found) : job(std::move(found)) {}
  static JobLookup unavailable_now() {
    JobLookup lookup;
    lookup.unavailable = true;
    return lookup;
  }

  std::optional<Job> job;
  bool unavailable = false;
};

// with_spec: the journal keeps the spec, its digest and the submitter;
// listings leave them out.
nlohmann::json job_json(const Job& job, bool with_spec);
std::string job_to_json(const Job& job, bool with_spec);
tl::expected<Job, std::string> job_from_json(std::string_view text);

// A fresh random job id.
std::string new_job_id();

} // namespace kcache::service
