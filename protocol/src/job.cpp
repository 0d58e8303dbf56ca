#include <kcache/protocol/enum_names.h>
#include <kcache/protocol/job.h>
#include <kcache/protocol/json_text.h>

#include <nlohmann/json.hpp>

namespace kcache::protocol {

using nlohmann::json;

namespace {

constexpr EnumNames<JobKind, 2>
    kKinds({{{JobKind::kCompile, "compile"}, {JobKind::kAutotune, "autotune"}}});

constexpr EnumNames<JobState, 5> kStates({{{JobState::kQueued, "queued"},
                                           {JobState::kRunning, "running"},
                                           {JobState::kSucceeded, "succeeded"},
                                           {JobState::kFailed, "failed"},
                                           {JobState::kCancelled, "cancelled"}}});

constexpr EnumNames<JobError, 10> kErrors({{{JobError::kNone, ""},
                                            {JobError::kInvalidSpec, "invalid-spec"},
                                            {JobError::kCompileFailed, "compile-failed"},
                                            {JobError::kUnavailable, "unavailable"},
                                            {JobError::kInternal, "internal"},
                                            {JobError::kCancelled, "cancelled"},
                                            {JobError::kResourceLimit, "resource-limit"},
                                            {JobError::kStore, "store"},
                                            {JobError::kAutotuneFailed, "autotune-failed"},
                                            {JobError::kInfrastructure, "infrastructure"}}});

} // namespace

std::string_view job_kind_name(JobKind kind) {
  return kKinds.name(kind);
}

tl::expected<JobKind, std::string> parse_job_kind(std::string_view name) {
  return kKinds.parse_or_error("job kind", name);
}

std::string_view job_state_name(JobState state) {
  return kStates.name(state);
}

tl::expected<JobState, std::string> parse_job_state(std::string_view name) {
  return kStates.parse_or_error("job state", name);
}

std::string_view job_error_name(JobError error) {
  return kErrors.name(error);
}

tl::expected<JobError, std::string> parse_job_error(std::string_view name) {
  return kErrors.parse_or_error("job error code", name);
}

json to_json(const JobView& job, bool with_spec) {
  json out{{"id", job.id},
           {"kind", job_kind_name(job.kind)},
           {"compile_key", job.compile_key},
           {"keys", job.keys},
           {"backend", job.backend},
           {"target", job.target},
           {"entry", job.entry},
           {"output", job.output},
           {"priority", job.priority},
           {"state", job_state_name(job.state)},
           {"submitted_ms", job.submitted_ms},
           {"started_ms", job.started_ms},
           {"finished_ms", job.finished_ms},
           {"attempts", job.attempts},
           {"submissions", job.submissions},
           {"output_size", job.output_size},
           {"compile_ms", job.compile_ms}};
  if (job.error_code != JobError::kNone) {
    out["error"] = {{"code", job_error_name(job.error_code)}, {"message", job.error_message}};
  }
  if (!job.log.empty()) {
    out["log"] = job.log;
  }
  if (!job.parents.empty()) {
    out["parents"] = job.parents;
  }
  if (job.kind == JobKind::kAutotune) {
    out["tuning_class"] = job.tuning_class;
    out["progress"] = {{"done", job.progress_done}, {"total", job.progress_total}};
  }
  if (!job.waiting_for.empty()) {
    out["waiting_for"] = job.waiting_for;
  }
  if (with_spec) {
    out["spec"] = job.spec_json;
    if (!job.manifests.empty()) {
      out["manifests"] = job.manifests;
    }
  }
  return out;
}

tl::expected<JobView, std::string> job_from_json(const json& in) {
  if (!in.is_object()) {
    return tl::unexpected(std::string("job record is not a JSON object"));
  }
  try {
    JobView job;
    job.id = in.at("id").get<std::string>();
    auto kind = parse_job_kind(in.value("kind", std::string("compile")));
    if (!kind) {
      return tl::unexpected(kind.error());
    }
    job.kind = *kind;
    job.parents = in.value("parents", std::vector<std::string>());
    job.tuning_class = in.value("tuning_class", std::string());
    if (const auto p = in.find("progress"); p != in.end() && p->is_object()) {
      job.progress_done = json_integer(*p, "done", std::size_t{0});
      job.progress_total = json_integer(*p, "total", std::size_t{0});
    }
    job.waiting_for = in.value("waiting_for", std::string());
    job.compile_key = in.at("compile_key").get<std::string>();
    job.keys = in.value("keys", std::vector<std::string>());
    job.spec_json = in.value("spec", std::string());
    // Absent in journals and stream entries written before manifests travelled.
    if (const auto m = in.find("manifests"); m != in.end() && m->is_object()) {
      for (const auto& [key, manifest] : m->items()) {
        if (manifest.is_string()) {
          job.manifests.emplace(key, manifest.get<std::string>());
        }
      }
    }
    job.backend = in.value("backend", std::string());
    job.target = in.value("target", std::string());
    job.entry = in.value("entry", std::string());
    job.output = in.value("output", std::string());
    job.priority = json_integer(in, "priority", int{0});
    auto state = parse_job_state(in.at("state").get<std::string>());
    if (!state) {
      return tl::unexpected(state.error());
    }
    job.state = *state;
    job.submitted_ms = json_integer(in, "submitted_ms", std::int64_t{0});
    job.started_ms = json_integer(in, "started_ms", std::int64_t{0});
    job.finished_ms = json_integer(in, "finished_ms", std::int64_t{0});
    job.attempts = json_integer(in, "attempts", std::uint32_t{0});
    job.submissions = json_integer(in, "submissions", std::uint32_t{1});
    if (const auto e = in.find("error"); e != in.end() && e->is_object()) {
      auto code = parse_job_error(e->value("code", std::string()));
      if (!code) {
        return tl::unexpected(code.error());
      }
      job.error_code = *code;
      job.error_message = e->value("message", std::string());
    }
    job.log = in.value("log", std::string());
    job.output_size = json_integer(in, "output_size", std::uint64_t{0});
    job.compile_ms = json_integer(in, "compile_ms", std::int64_t{0});
    return job;
  } catch (const json::exception& e) {
    return tl::unexpected(std::string("job record: ") + e.what());
  }
}

tl::expected<JobView, std::string> job_from_json_text(std::string_view text) {
  return job_from_json(parse_json_or_discarded(text));
}

void add_publication(json& answer, const Publication& publication) {
  if (!publication.published_under.empty()) {
    answer["published_under"] = publication.published_under;
  }
  if (!publication.client_key_refused.empty()) {
    answer["client_key_refused"] = publication.client_key_refused;
  }
}

Publication publication_from_json(const json& answer) {
  Publication out;
  if (!answer.is_object()) {
    return out;
  }
  if (const auto keys = answer.find("published_under"); keys != answer.end() && keys->is_array()) {
    for (const json& key : *keys) {
      if (key.is_string()) {
        out.published_under.push_back(key.get<std::string>());
      }
    }
  }
  if (const auto why = answer.find("client_key_refused"); why != answer.end() && why->is_string()) {
    out.client_key_refused = why->get<std::string>();
  }
  return out;
}

} // namespace kcache::protocol
