// Client's compile-job calls: submit, job (long-poll), cancel, get_or_compile.

#include "responses.h"

#include <kcache/client/client.h>
#include <kcache/protocol/job.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

namespace kcache::client {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

// How long get_or_compile waits before polling a job again that kcached
// could not read (503: the cluster queue's Redis did not answer).
constexpr std::chrono::milliseconds kUnreadableJobRetry{500};

Result<JobStatus> parse_job(const json& doc, std::string text, int http_status) {
  auto view = protocol::job_from_json(doc);
  if (!view) {
    return tl::unexpected(
        ClientError{ErrorCode::kProtocol, http_status, "malformed job answer: " + view.error()});
  }
  JobStatus job;
  static_cast<protocol::JobView&>(job) = std::move(*view);
  job.json = std::move(text);
  return job;
}

Result<JobStatus> job_from_response(const HttpResponse& res) {
  if (res.status != 200) {
    return tl::unexpected(from_status(res));
  }
  return parse_job(protocol::parse_json_or_discarded(res.body), res.body, res.status);
}

} // namespace

Result<Submitted> Client::submit(std::string_view key, std::string_view spec_json, int priority) {
  return submit(key, spec_json, priority, {});
}

Result<Submitted> Client::submit(std::string_view key, std::string_view spec_json, int priority,
                                 std::string_view manifest_json) {
  if (!key.empty()) {
    if (auto ok = check_key(key); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  json spec = protocol::parse_json_or_discarded(spec_json);
  if (!spec.is_object()) {
    return tl::unexpected(
        ClientError{ErrorCode::kInvalid, 0, "the compile spec is not a JSON object"});
  }
  json body{{"spec", std::move(spec)}, {"priority", priority}};
  if (!key.empty()) {
    body["key"] = key;
  }
  if (!manifest_json.empty()) {
    json manifest = protocol::parse_json_or_discarded(manifest_json);
    if (!manifest.is_object()) {
      return tl::unexpected(
          ClientError{ErrorCode::kInvalid, 0, "the key manifest is not a JSON object"});
    }
    body["manifest"] = std::move(manifest);
  }
  auto res = request(HttpMethod::kPost, "/v1/jobs", protocol::json_text(body),
                     protocol::wire::kJsonContentType);
  if (!res) {
    return tl::unexpected(res.error());
  }
  const json doc = protocol::parse_json_or_discarded(res->body);
  const std::string status = doc.is_object() ? doc.value("status", std::string()) : "";
  if ((res->status != 200 && res->status != 202 && status != "busy") || status.empty()) {
    return tl::unexpected(from_status(*res));
  }
  Submitted out;
  out.status = status;
  out.message = doc.value("message", std::string());
  out.retry_after = std::chrono::milliseconds(doc.value("retry_after_ms", 0));
  protocol::Publication publication = protocol::publication_from_json(doc);
  out.published_under = std::move(publication.published_under);
  out.client_key_refused = std::move(publication.client_key_refused);
  if (const auto job = doc.find("job"); job != doc.end() && job->is_object()) {
    auto parsed = parse_job(*job, protocol::json_text(*job), res->status);
    if (!parsed) {
      return tl::unexpected(parsed.error());
    }
    out.job = std::move(*parsed);
  }
  return out;
}

Result<JobStatus> Client::job(std::string_view id, std::chrono::milliseconds wait) {
  std::string target = "/v1/jobs/" + std::string(id);
  if (wait.count() > 0) {
    target += "?wait_ms=" + std::to_string(wait.count());
  }
  // The daemon holds a long-poll up to `wait`: the deadline covers that too.
  auto res = round_trip(HttpRequest{HttpMethod::kGet, target, {}, {}, options_.token},
                        wait + options_.timeout);
  if (!res) {
    return tl::unexpected(res.error());
  }
  return job_from_response(*res);
}

Result<JobStatus> Client::cancel(std::string_view id) {
  auto res = request(HttpMethod::kDelete, "/v1/jobs/" + std::string(id));
  if (!res) {
    return tl::unexpected(res.error());
  }
  return job_from_response(*res);
}

Result<CompileOutcome> Client::get_or_compile(const CompileRequest& request) {
  using Kind = CompileOutcome::Kind;
  const auto deadline = Clock::now() + request.wait_timeout;
  auto fetch = [&](Kind kind, std::optional<JobStatus> job) -> Result<CompileOutcome> {
    auto artifact = get(request.key);
    if (!artifact) {
      return tl::unexpected(artifact.error());
    }
    if (!*artifact) {
      // Finished but gone (evicted at once, or a store failure): not a hit.
      return CompileOutcome{Kind::kPending, std::nullopt, std::move(job)};
    }
    return CompileOutcome{kind, std::move(*artifact), std::move(job)};
  };

  if (auto hit = get(request.key); !hit) {
    return tl::unexpected(hit.error());
  } else if (*hit) {
    return CompileOutcome{Kind::kHit, std::move(*hit), std::nullopt};
  }
  while (true) {
    auto submitted = submit(request.key, request.spec_json, request.priority);
    if (!submitted) {
      return tl::unexpected(submitted.error());
    }
    if (submitted->status == "cached") {
      return fetch(Kind::kHit, std::nullopt);
    }
    if (submitted->status == "failed-recently") {
      return CompileOutcome{Kind::kFailed, std::nullopt, std::move(submitted->job)};
    }
    if (submitted->status == "busy") {
      const auto retry = std::max(submitted->retry_after, std::chrono::milliseconds(100));
      if (request.policy == WaitPolicy::kAsync || Clock::now() + retry >= deadline) {
        return CompileOutcome{Kind::kPending, std::nullopt, std::nullopt};
      }
      std::this_thread::sleep_for(retry);
      continue;
    }
    if (!submitted->job) {
      return tl::unexpected(ClientError{ErrorCode::kProtocol, 0, "submit answered without a job"});
    }
    JobStatus job = std::move(*submitted->job);
    if (request.policy == WaitPolicy::kAsync) {
      return CompileOutcome{Kind::kPending, std::nullopt, std::move(job)};
    }
    while (!job.finished()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        return CompileOutcome{Kind::kPending, std::nullopt, std::move(job)};
      }
      // Long-polls of at most a minute: a daemon restart costs one poll, not the wait.
      auto polled = this->job(job.id, std::min(left, std::chrono::milliseconds(60'000)));
      if (!polled && polled.error().http_status == 503) {
        // kcached could not answer for the job now (its cluster queue's Redis
        // did not, or it is busy): the job is not gone. Poll again while the
        // wait lasts; at its end the job is pending, as one still running is.
        if (Clock::now() + kUnreadableJobRetry >= deadline) {
          return CompileOutcome{Kind::kPending, std::nullopt, std::move(job)};
        }
        std::this_thread::sleep_for(kUnreadableJobRetry);
        continue;
      }
      if (!polled) {
        return tl::unexpected(polled.error());
      }
      job = std::move(*polled);
    }
    if (job.state != JobState::kSucceeded) {
      return CompileOutcome{Kind::kFailed, std::nullopt, std::move(job)};
    }
    return fetch(Kind::kCompiled, std::move(job));
  }
}

} // namespace kcache::client
