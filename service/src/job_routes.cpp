// The /v1/jobs routes of RequestHandler: submit, show (long-poll in
// handle_async), list and cancel compile jobs.

#include "responses.h"

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

} // namespace

Response RequestHandler::jobs(const Request& req, std::string_view path, const Query& query) {
  if (jobs_ == nullptr) {
    return error(req, http::status::service_unavailable,
                 "this kcached runs no compile workers (no kcache-worker, or workers = 0)");
  }
  const http::verb method = req.method();
  if (path == "/v1/jobs") {
    if (method == http::verb::post) {
      return submit_job(req);
    }
    if (method != http::verb::get) {
      Response res = error(req, http::status::method_not_allowed, "use GET or POST");
      res.set(http::field::allow, "GET, POST");
      return res;
    }
    std::optional<JobState> state;
    if (const std::string s = query.get("state"); !s.empty()) {
      auto parsed = parse_job_state(s);
      if (!parsed) {
        return error(req, http::status::bad_request, parsed.error());
      }
      state = *parsed;
    }
    json list = json::array();
    for (const Job& job : jobs_->list(state, parse_limit(query.get("limit"), 100))) {
      list.push_back(job_json(job, /*with_spec=*/false));
    }
    const JobCounts c = jobs_->counts();
    return json_response(req, http::status::ok,
                         json{{"jobs", std::move(list)},
                              {"counts",
                               {{"queued", c.queued},
                                {"running", c.running},
                                {"finished", c.finished},
                                {"workers", c.workers},
                                {"queue_capacity", c.queue_capacity}}}});
  }
  const std::string id(path.substr(std::string_view("/v1/jobs/").size()));
  if (method == http::verb::get) {
    return job_response(req, jobs_->find(id), id);
  }
  if (method == http::verb::delete_) {
    return job_response(req, jobs_->cancel(id), id);
  }
  Response res = error(req, http::status::method_not_allowed, "use GET or DELETE");
  res.set(http::field::allow, "GET, DELETE");
  return res;
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

Response RequestHandler::submit_job(const Request& req) {
  const json doc = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("spec")) {
    return error(req, http::status::bad_request,
                 R"(expected {"spec": {...compile spec...}, "key": "...", "priority": 0})");
  }
  Submission submission;
  const json& spec = doc["spec"];
  submission.spec_json = spec.is_string() ? spec.get<std::string>() : cachekey::json_text(spec);
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
      submission.priority = cachekey::json_integer<int>(*priority);
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
