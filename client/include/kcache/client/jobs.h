#pragma once
// The compile-job side of libkcache: what submit, job and get_or_compile
// return. Jobs run in kcached; their results land in the cache under the
// submitted key, so a finished job's artifact is an ordinary get away.

#include <kcache/client/artifact.h>
#include <kcache/protocol/job.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kcache::client {

using protocol::JobError;
using protocol::JobState;

// A job as the daemon rendered it (protocol/job.h: id, state, error_code and
// error_message, log, keys, compile_ms, ...), read by the same code.
struct JobStatus : protocol::JobView {
  std::string json; // the daemon's whole answer
};

struct Submitted {
  // queued, joined (one compile for several submitters), cached (nothing to
  // do), failed-recently (the negative cache answered), busy (queue full)
  std::string status;
  std::optional<JobStatus> job;
  std::string message;
  std::chrono::milliseconds retry_after{0}; // for busy
  // Where the result goes: the compile key, and the submitted key only when
  // the token may write its namespace; otherwise client_key_refused says why.
  std::vector<std::string> published_under;
  std::string client_key_refused;
};

enum class WaitPolicy {
  kWait,  // block (up to wait_timeout) until the compile finishes
  kAsync, // submit and return at once
};

struct CompileRequest {
  std::string key;
  std::string spec_json;
  int priority = 0;
  WaitPolicy policy = WaitPolicy::kWait;
  std::chrono::milliseconds wait_timeout{300'000};
};

struct CompileOutcome {
  enum class Kind {
    kHit,      // it was in the cache
    kCompiled, // compiled now (by this call's job or one it joined)
    kPending,  // async policy, or the wait ran out: the job goes on
    kFailed,   // the compile failed: error and log say why
  };
  Kind kind = Kind::kPending;
  std::optional<Artifact> artifact; // for kHit and kCompiled
  std::optional<JobStatus> job;
};

} // namespace kcache::client
