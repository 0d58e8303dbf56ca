// The /v1/jobs routes of RequestHandler: submit, show (and long-poll), list
// and cancel compile jobs.

#include "responses.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/request_handler.h>

#include <charconv>

namespace kcache::service {

using nlohmann::json;

namespace {

std::size_t parse_limit(const std::string& text, std::size_t fallback) {
  std::size_t value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// Whose quota a submission counts against: its bearer token, by a digest (a
// token has no name, and the token itself must not reach logs or listings).
// Without one, every client shares the anonymous quota (the handler does not
// see the peer's address).
std::string submitter_of(const Request& req) {
  const std::string_view auth = req[http::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (!auth.starts_with(kBearer)) {
    return {};
  }
  return "token " +
         cachekey::to_hex(cachekey::Sha256::of(auth.substr(kBearer.size()))).substr(0, 12);
}

// Room for the submission's other members around its spec.
constexpr std::uint64_t kSubmissionSlack = 64 << 10;

Response no_workers(const Request& req) {
  return error(req, http::status::service_unavailable,
               "this kcached runs no compile workers (no kcache-worker, or workers = 0)");
}

} // namespace

Response RequestHandler::list_jobs(const Request& req, const RouteArgs& args) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  std::optional<JobState> state;
  if (const std::string s = args.query.get("state"); !s.empty()) {
    auto parsed = parse_job_state(s);
    if (!parsed) {
      return error(req, http::status::bad_request, parsed.error());
    }
    state = *parsed;
  }
  // Rendered by protocol/admin.h, which clients read it with (a listing
  // shows no spec, so the service's own members of Job do not appear).
  protocol::JobList list;
  for (Job& job : jobs_->list(state, parse_limit(args.query.get("limit"), 100))) {
    list.jobs.push_back(std::move(job));
  }
  const JobCounts c = jobs_->counts();
  list.counts = {c.queued, c.running, c.finished, c.workers, c.queue_capacity};
  return json_response(req, http::status::ok, protocol::to_json(list));
}

Response RequestHandler::show_job(const Request& req, const RouteArgs& args) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  return job_response(req, jobs_->find(std::string(args.param)), args.param);
}

Response RequestHandler::cancel_job(const Request& req, const RouteArgs& args) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  return job_response(req, jobs_->cancel(std::string(args.param)), args.param);
}

void RequestHandler::wait_for_job(const Request& request, const RouteArgs& args,
                                  std::chrono::milliseconds wait, const Responder& respond) {
  if (jobs_ == nullptr) {
    respond(handle(request));
    return;
  }
  // The answer comes from the job manager, on its thread.
  const auto start = std::chrono::steady_clock::now();
  const std::string id(args.param);
  jobs_->wait(
      id, start + wait,
      [this, respond, id, start, label = args.label, version = request.version(),
       keep_alive = request.keep_alive()](const std::optional<Job>& job) {
        Request shape{http::verb::get, "/", version};
        shape.keep_alive(keep_alive);
        Response response = job_response(shape, job, id);
        record_metrics(
            label, http::verb::get, response.result_int(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        respond(std::move(response));
      });
}

Response RequestHandler::job_response(const Request& req, const std::optional<Job>& job,
                                      std::string_view id) {
  if (!job) {
    return error(req, http::status::not_found, "no job " + std::string(id));
  }
  json body = job_json(*job, /*with_spec=*/false);
  if (job->state == JobState::kQueued && jobs_ != nullptr) {
    if (auto position = jobs_->queue_position(job->id)) {
      body["queue_position"] = *position;
    }
  }
  return json_response(req, http::status::ok, body);
}

std::optional<Response> RequestHandler::refuse_submission_head(const Request& head) const {
  const std::string_view length = head[http::field::content_length];
  std::uint64_t bytes = 0;
  if (jobs_ == nullptr || length.empty() ||
      std::from_chars(length.data(), length.data() + length.size(), bytes).ec != std::errc()) {
    return std::nullopt; // no length to judge by: the body is checked once read
  }
  if (const std::uint64_t most = jobs_->max_submission_bytes() + kSubmissionSlack; bytes > most) {
    return error(head, http::status::payload_too_large,
                 "the submission is " + std::to_string(bytes) +
                     " bytes; a spec within max_spec_bytes fits in " + std::to_string(most));
  }
  return std::nullopt;
}

Response RequestHandler::submit_job(const Request& req, const RouteArgs& /*args*/) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  if (const std::uint64_t most = jobs_->max_submission_bytes() + kSubmissionSlack;
      req.body().size() > most) {
    // Refused before parsing: the JSON alone would cost several times its size.
    return error(req, http::status::payload_too_large,
                 "the submission is " + std::to_string(req.body().size()) +
                     " bytes; a spec within max_spec_bytes fits in " + std::to_string(most));
  }
  const json doc = protocol::parse_json_or_discarded(req.body());
  if (!doc.is_object() || !doc.contains("spec")) {
    return error(req, http::status::bad_request,
                 R"(expected {"spec": {...compile spec...}, "key": "...", "priority": 0})");
  }
  Submission submission;
  submission.submitter = submitter_of(req);
  const json& spec = doc["spec"];
  submission.spec_json = spec.is_string() ? spec.get<std::string>() : protocol::json_text(spec);
  if (const auto key = doc.find("key"); key != doc.end()) {
    if (!key->is_string()) {
      return error(req, http::status::bad_request, "key must be a string");
    }
    submission.key = key->get<std::string>();
  }
  if (const auto tuning = doc.find("tuning_class"); tuning != doc.end()) {
    if (!tuning->is_string()) {
      return error(req, http::status::bad_request, "tuning_class must be a string");
    }
    submission.tuning_class = tuning->get<std::string>();
  }
  if (const auto priority = doc.find("priority"); priority != doc.end()) {
    try {
      submission.priority = protocol::json_integer<int>(*priority);
    } catch (const json::exception&) {
      return error(req, http::status::bad_request, "priority must be an integer");
    }
  }
  const SubmitResult result = jobs_->submit(submission);
  json body{{"status", submit_status_name(result.status)}, {"message", result.message}};
  if (result.job) {
    body["job"] = job_json(*result.job, /*with_spec=*/false);
  }
  http::status status = http::status::ok;
  switch (result.status) {
  case SubmitStatus::kQueued:
  case SubmitStatus::kJoined:
    status = http::status::accepted;
    break;
  case SubmitStatus::kCached:
  case SubmitStatus::kFailedRecently:
    status = http::status::ok;
    break;
  case SubmitStatus::kInvalid:
    status = http::status::bad_request;
    break;
  case SubmitStatus::kTooLarge:
    status = http::status::payload_too_large;
    break;
  case SubmitStatus::kBusy:
  case SubmitStatus::kUnavailable:
  case SubmitStatus::kStoreError:
    status = http::status::service_unavailable;
    break;
  }
  if (result.status == SubmitStatus::kBusy) {
    body["retry_after_ms"] = 1000;
  }
  if (status != http::status::ok && status != http::status::accepted) {
    body["error"] = result.message;
  }
  Response res = json_response(req, status, body);
  if (result.status == SubmitStatus::kBusy) {
    res.set(http::field::retry_after, "1");
  }
  return res;
}

} // namespace kcache::service
