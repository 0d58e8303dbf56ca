// The /v1/jobs routes of RequestHandler: submit, show (and long-poll), list
// and cancel compile jobs.

#include "responses.h"
#include "scopes.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/service/job_manager.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/request_handler.h>
#include <kcache/storage/redis_client.h>

#include <algorithm>
#include <charconv>
#include <limits>

namespace kcache::service {

using nlohmann::json;

namespace {

std::size_t parse_limit(const std::string& text, std::size_t fallback) {
  std::size_t value = fallback;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// A client key's namespace: a kc1- key's is its submitted manifest's ("":
// none came with it, as key_scope says).
std::string client_key_ns(const Job& job, const std::string& key, const KeyScope& scope) {
  if (scope.kind != KeyScope::Kind::kManifest) {
    return scope.ns;
  }
  const auto text = job.manifests.find(key);
  if (text == job.manifests.end()) {
    return scope.ns;
  }
  auto manifest = cachekey::manifest_from_json(text->second);
  return manifest && manifest->key() == key ? manifest->ns : scope.ns;
}

// Whether `who` may see (read) or cancel (submit) `job`: its submitter may;
// others need the role in the namespace of one of its client keys, or, for
// a job published under its compile key only, the role anywhere.
bool may_touch_job(const Principal& who, const Job& job, Role need) {
  if (who.name == job.submitter || who.may_everywhere(need)) {
    return true;
  }
  bool client_keys = false;
  for (const std::string& key : job.keys) {
    if (key == job.compile_key) {
      continue;
    }
    client_keys = true;
    const KeyScope scope = key_scope(key);
    if (scope.kind == KeyScope::Kind::kCompile ? who.may_somewhere(need)
                                               : who.may(need, client_key_ns(job, key, scope))) {
      return true;
    }
  }
  return !client_keys && who.may_somewhere(need);
}

// Job `id` as `who` may see it: one it may not read is as if there were none
// (404; 503 stays, when the cluster's Redis could not say either way).
JobLookup readable_job(const JobManager& jobs, const std::string& id, const Principal& who) {
  JobLookup found = jobs.find(id);
  if (found.job && !may_touch_job(who, *found.job, Role::kRead)) {
    found.job.reset();
  }
  return found;
}

// Room for the submission's other members around its spec.
constexpr std::uint64_t kSubmissionSlack = 64 << 10;

// The submission's "manifest" (a key manifest, as a PUT's record carries):
// it must hash to `key`, and names the key when none was given. nullopt:
// none; an error: a malformed one, or one of another key.
tl::expected<std::optional<cachekey::KeyManifest>, std::string>
submitted_manifest(const json& doc, std::string& key) {
  const auto m = doc.find("manifest");
  if (m == doc.end() || m->is_null()) {
    return std::nullopt;
  }
  if (!m->is_object() && !m->is_string()) {
    return tl::unexpected(std::string("manifest must be a key manifest (a JSON object)"));
  }
  auto manifest = cachekey::manifest_from_json(m->is_string() ? m->get<std::string>()
                                                              : protocol::json_text(*m));
  if (!manifest) {
    return tl::unexpected("manifest: " + manifest.error().message);
  }
  const std::string derived = manifest->key();
  if (key.empty()) {
    key = derived;
  } else if (key != derived) {
    return tl::unexpected("the manifest hashes to " + derived + ", not to the key " + key);
  }
  return std::move(*manifest);
}

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
  std::optional<JobKind> kind;
  if (const std::string k = args.query.get("kind"); !k.empty()) {
    auto parsed = parse_job_kind(k);
    if (!parsed) {
      return error(req, http::status::bad_request, parsed.error());
    }
    kind = *parsed;
  }
  // ?log=0: without the compiler logs (the dashboard's live list, answered
  // on every change; a job's own GET has its log).
  const bool logs = args.query.get("log") != "0";
  // Counted before listing: a change while this answer is built makes the
  // next long-poll answer at once rather than miss it.
  const std::uint64_t changes = jobs_->changes();
  // Rendered by protocol/admin.h, which clients read it with (a listing
  // shows no spec, so the service's own members of Job do not appear).
  protocol::JobList list;
  const std::size_t limit = parse_limit(args.query.get("limit"), 100);
  // Filter first, then limit: a scoped token gets up to `limit` of the jobs
  // it may read, not what is left of the newest `limit` of everyone's. The
  // table is bounded, so asking it for all of them is bounded too.
  const bool whole = args.who.may_everywhere(Role::kRead) && !kind;
  for (Job& job : jobs_->list(state, whole ? limit : std::numeric_limits<std::size_t>::max())) {
    if (list.jobs.size() >= limit) {
      break;
    }
    if ((!kind || job.kind == *kind) &&
        may_touch_job(args.who, job, Role::kRead)) { // only namespaces it may read
      if (!logs) {
        job.log.clear();
      }
      list.jobs.push_back(std::move(job));
    }
  }
  const JobCounts c = jobs_->counts();
  list.counts = {c.queued, c.running, c.finished, c.workers, c.queue_capacity};
  nlohmann::json body = protocol::to_json(list);
  body["changes"] = changes;
  return json_response(req, http::status::ok, body);
}

void RequestHandler::wait_for_jobs(const Request& request, const RouteArgs& args,
                                   std::chrono::milliseconds wait, const Responder& respond) {
  // ?since=N (the "changes" of the last answer): answered once a job changed
  // after it, or when the wait ends; without it, at once.
  const std::string since = args.query.get("since");
  std::uint64_t seen = 0;
  if (jobs_ == nullptr || since.empty() ||
      std::from_chars(since.data(), since.data() + since.size(), seen).ec != std::errc()) {
    respond(handle(request));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // The answer is built when it is sent, on the job manager's thread: the
  // request is gone by then, so it keeps what the listing reads.
  jobs_->wait_for_change(
      seen, start + wait,
      [this, respond, start, query = args.query, label = args.label, who = &args.who,
       version = request.version(), keep_alive = request.keep_alive()] {
        Request shape{http::verb::get, "/", version};
        shape.keep_alive(keep_alive);
        Response response = list_jobs(shape, RouteArgs{{}, query, label, *who});
        record_metrics(
            label, http::verb::get, response.result_int(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        respond(std::move(response));
      });
}

Response RequestHandler::show_job(const Request& req, const RouteArgs& args) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  return job_response(req, readable_job(*jobs_, std::string(args.param), args.who), args.param);
}

Response RequestHandler::cancel_job(const Request& req, const RouteArgs& args) {
  if (jobs_ == nullptr) {
    return no_workers(req);
  }
  const std::string id(args.param);
  const JobLookup found = readable_job(*jobs_, id, args.who);
  if (!found.job) {
    return job_response(req, found, id);
  }
  if (!may_touch_job(args.who, *found.job, Role::kSubmit)) {
    return error(req, http::status::forbidden,
                 "token '" + args.who.name + "' may not cancel job " + id +
                     " (its submitter may, or the submit role in its namespace)");
  }
  return job_response(req, jobs_->cancel(id), id);
}

void RequestHandler::wait_for_job(const Request& request, const RouteArgs& args,
                                  std::chrono::milliseconds wait, const Responder& respond) {
  if (jobs_ == nullptr) {
    respond(handle(request));
    return;
  }
  // A hung Redis master costs this request one op timeout, not one per read
  // (the lookup below and the wait's own run on an I/O thread).
  const storage::RedisCallScope redis_calls;
  const auto start = std::chrono::steady_clock::now();
  const std::string id(args.param);
  if (const JobLookup found = readable_job(*jobs_, id, args.who); !found.job) {
    Response response = job_response(request, found, id);
    record_metrics(args.label, http::verb::get, response.result_int(),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    respond(std::move(response)); // 404, or 503 when Redis did not answer, at once
    return;
  }
  // The answer comes from the job manager, on its thread.
  jobs_->wait(
      id, start + wait,
      [this, respond, id, start, label = args.label, version = request.version(),
       keep_alive = request.keep_alive()](const JobLookup& job) {
        Request shape{http::verb::get, "/", version};
        shape.keep_alive(keep_alive);
        Response response = job_response(shape, job, id);
        record_metrics(
            label, http::verb::get, response.result_int(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        respond(std::move(response));
      });
}

Response RequestHandler::job_response(const Request& req, const JobLookup& found,
                                      std::string_view id) {
  if (found.unavailable) {
    // Not "no such job": the cluster queue's Redis did not answer; the
    // client polls again (or fails open) rather than give the job up.
    Response res =
        error(req, http::status::service_unavailable,
              "job " + std::string(id) +
                  " cannot be read now: the cluster queue's Redis does not answer; retry");
    res.set(http::field::retry_after, "1");
    return res;
  }
  if (!found.job) {
    return error(req, http::status::not_found, "no job " + std::string(id));
  }
  const Job& job = *found.job;
  json body = job_json(job, /*with_spec=*/false);
  if (job.state == JobState::kQueued && jobs_ != nullptr) {
    if (auto position = jobs_->queue_position(job.id)) {
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

Response RequestHandler::submit_job(const Request& req, const RouteArgs& args) {
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
    return error(
        req, http::status::bad_request,
        R"(expected {"spec": {...compile spec...}, "key": "...", "manifest": {...}, "priority": 0})");
  }
  Submission submission;
  submission.submitter = args.who.name;
  const json& spec = doc["spec"];
  submission.spec_json = spec.is_string() ? spec.get<std::string>() : protocol::json_text(spec);
  if (const auto key = doc.find("key"); key != doc.end()) {
    if (!key->is_string()) {
      return error(req, http::status::bad_request, "key must be a string");
    }
    submission.key = key->get<std::string>();
  }
  auto manifest = submitted_manifest(doc, submission.key);
  if (!manifest) {
    return error(req, http::status::bad_request, manifest.error());
  }
  // The job's namespace is its client key's: submitting there needs the
  // submit role there (a job under the compile key only: anywhere).
  protocol::Publication publication;
  if (!submission.key.empty()) {
    const KeyScope scope = key_scope(submission.key);
    if (scope.kind == KeyScope::Kind::kNamed && !args.who.may(Role::kSubmit, scope.ns)) {
      return error(req, http::status::forbidden,
                   "token '" + args.who.name + "' may not submit jobs in namespace '" + scope.ns +
                       "' (it needs the submit role there)");
    }
    // Publishing under the client's key is a write of it (issue 14): without
    // the write role there, the result goes under the compile key only.
    // A kc1- key is in its manifest's namespace, as for a PUT.
    const cachekey::KeyManifest* in = *manifest ? &**manifest : nullptr;
    if (auto refused = write_refusal(args.who, submission.key, in)) {
      publication.client_key_refused = std::move(*refused);
      submission.key.clear();
    } else if (in != nullptr) {
      submission.manifest_json = cachekey::manifest_to_json(*in);
    }
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
    // Where this submission's result goes (not the keys other submitters joined with).
    publication.published_under.push_back(result.job->compile_key);
  }
  if (!submission.key.empty() &&
      std::find(publication.published_under.begin(), publication.published_under.end(),
                submission.key) == publication.published_under.end()) {
    publication.published_under.push_back(submission.key);
  }
  protocol::add_publication(body, publication);
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
