#pragma once
// Submissions, and what a submitted spec compiles to under which key: the
// spec checked hermetic and canonical (spec_check.h), target "native"
// resolved to this host's CPU, and keyed with the runner's toolchain for its
// backend. No state beyond the runner it reads: JobManager calls it outside
// its lock (a spec may be large).

#include <kcache/compiler/compile_spec.h>
#include <kcache/service/job.h>
#include <kcache/service/job_runner.h>

#include <tl/expected.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace kcache::service {

struct Submission {
  std::string key;       // the client's key; "" publishes under the compile key only
  std::string spec_json; // a CompileSpec; with an "autotune" member, a search
  int priority = 0;
  std::string tuning_class; // autotune: must be this node's, if given
  // Whose quota the jobs count against: the token's identity, or the client
  // when tokens are off ("" for everyone else).
  std::string submitter;
  // A kc1- key's manifest (JSON text) that hashes to it (job_routes.cpp
  // checks): the job stores its record with it. "": none.
  std::string manifest_json = {};
};

enum class SubmitStatus {
  kQueued,         // a new job
  kJoined,         // the same compile was already queued or running: one job for both
  kCached,         // the artifact exists already: nothing to compile
  kFailedRecently, // the same compile failed within the negative-cache TTL
  kBusy,           // the queue is full: retry later
  kInvalid,        // the spec or the key is malformed
  kUnavailable,    // no worker, a backend not built into the worker, or shutting down
  kStoreError,     // the store or the journal failed
  kTooLarge,       // the spec is over max_spec_bytes
};
std::string_view submit_status_name(SubmitStatus status);

struct SubmitResult {
  SubmitStatus status = SubmitStatus::kInvalid;
  std::optional<Job> job;
  std::string message;
};

class JobIntake {
public:
  JobIntake(const JobRunner& runner, std::uint64_t max_spec_bytes)
      : runner_(runner), max_spec_bytes_(max_spec_bytes) {}

  // kTooLarge when the submission's spec text is longer than a spec of
  // max_spec_bytes can be as JSON (checked before parsing it; escapes may
  // double a source's bytes); nullopt when it may be parsed.
  std::optional<SubmitResult> too_long(std::string_view spec_json) const;
  // kTooLarge when the spec's source and headers are over max_spec_bytes.
  std::optional<SubmitResult> too_large(const compiler::CompileSpec& spec) const;
  // The longest spec text too_long() lets through.
  static std::uint64_t max_text_bytes(std::uint64_t max_spec_bytes) {
    return 2 * max_spec_bytes + (1ULL << 20);
  }

  // The spec a job compiles, or why it is refused (kUnavailable: no
  // toolchain for its backend; kInvalid: the spec checks).
  tl::expected<compiler::CompileSpec, SubmitResult> prepare(compiler::CompileSpec spec) const;
  // "kcc-<sha256>" of a prepared spec and its backend's toolchain.
  tl::expected<std::string, std::string> compile_key(const compiler::CompileSpec& spec) const;

  // A compile submission as a new job (not yet admitted) and the key its
  // result is published under; or why it is refused.
  struct Compile {
    Job job;
    std::string key; // the client's, or the compile key
  };
  tl::expected<Compile, SubmitResult> compile(const Submission& submission) const;

  // A new queued job for `spec` (the listing fields read from it).
  static Job job(const compiler::CompileSpec& spec, const std::string& compile_key,
                 std::string spec_json, int priority);
  // SHA-256 of the spec's bytes: failures are remembered by it.
  static std::string spec_digest(const std::string& spec_json);

private:
  const JobRunner& runner_;
  const std::uint64_t max_spec_bytes_;
};

} // namespace kcache::service
