// The /v1/runs routes of RequestHandler: kcache.torch's compile reports, one
// per process of a run (run_reports.h). A report is written with the write
// role in its namespace and read with the read role; a namespace a token may
// not read answers as if nothing were there. Reports that cannot be reached
// (cluster mode, Redis away) answer 503.

#include "responses.h"

#include <kcache/protocol/clock.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/run_reports.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

using nlohmann::json;

namespace {

constexpr std::size_t kDefaultListLimit = 50;
constexpr std::size_t kMaxListLimit = 500;

// "a/b/c" -> {"a", "b", "c"}; nullopt unless it has `parts` valid names.
std::optional<std::vector<std::string>> split_names(std::string_view path, std::size_t parts) {
  std::vector<std::string> names;
  while (names.size() < parts) {
    const auto slash = path.find('/');
    names.emplace_back(path.substr(0, slash));
    if (!is_valid_run_name(names.back())) {
      return std::nullopt;
    }
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if ((slash == std::string_view::npos) != (names.size() == parts)) {
      return std::nullopt;
    }
  }
  return names;
}

std::size_t limit_of(const std::string& text) {
  std::size_t limit = kDefaultListLimit;
  std::from_chars(text.data(), text.data() + text.size(), limit);
  return std::clamp<std::size_t>(limit, 1, kMaxListLimit);
}

constexpr std::string_view kNamesHelp = "1-128 characters of [A-Za-z0-9._:+=-] each";

} // namespace

Response RequestHandler::put_run(const Request& req, const RouteArgs& args) {
  if (runs_ == nullptr) {
    return error(req, http::status::not_found, "this kcached keeps no run reports");
  }
  const auto names = split_names(args.param, 3);
  if (!names) {
    return error(req, http::status::bad_request,
                 "expected /v1/runs/NAMESPACE/RUN/RANK, " + std::string(kNamesHelp));
  }
  const std::string& ns = (*names)[0];
  if (!args.who.may(Role::kWrite, ns)) {
    return error(req, http::status::forbidden,
                 "token '" + args.who.name + "' may not write in namespace '" + ns + "'");
  }
  if (req.body().size() > runs_->limits().max_report_bytes) {
    return error(req, http::status::payload_too_large,
                 "a run report may be at most " + std::to_string(runs_->limits().max_report_bytes) +
                     " bytes");
  }
  json report = json::parse(req.body(), nullptr, /*allow_exceptions=*/false);
  if (!report.is_object()) {
    return error(req, http::status::bad_request, "a run report is a JSON object");
  }
  if (auto stored = runs_->put(ns, (*names)[1], (*names)[2], report, protocol::unix_now_ms());
      !stored) {
    return error(req, http::status::service_unavailable, stored.error());
  }
  return json_response(req, http::status::ok, json{{"stored", true}});
}

Response RequestHandler::list_runs(const Request& req, const RouteArgs& args) {
  if (runs_ == nullptr) {
    return error(req, http::status::not_found, "this kcached keeps no run reports");
  }
  std::optional<std::string> ns;
  if (std::string wanted = args.query.get("namespace"); !wanted.empty()) {
    ns = std::move(wanted);
  }
  const auto readable = [&who = args.who](std::string_view name) {
    return who.may(Role::kRead, name);
  };
  const auto listed =
      runs_->list(readable, ns, limit_of(args.query.get("limit")), protocol::unix_now_ms());
  if (!listed) {
    return error(req, http::status::service_unavailable, listed.error());
  }
  json runs = json::array();
  for (const RunSummary& summary : *listed) {
    runs.push_back(to_json(summary));
  }
  return json_response(req, http::status::ok, json{{"runs", std::move(runs)}});
}

Response RequestHandler::show_run(const Request& req, const RouteArgs& args) {
  if (runs_ == nullptr) {
    return error(req, http::status::not_found, "this kcached keeps no run reports");
  }
  const auto names = split_names(args.param, 2);
  if (!names) {
    return error(req, http::status::bad_request,
                 "expected /v1/runs/NAMESPACE/RUN, " + std::string(kNamesHelp));
  }
  const std::string& ns = (*names)[0];
  const std::string& run = (*names)[1];
  if (!args.who.may(Role::kRead, ns)) {
    return error(req, http::status::not_found, "no run " + run + " in namespace " + ns);
  }
  const auto found = runs_->get(ns, run, protocol::unix_now_ms());
  if (!found) {
    return error(req, http::status::service_unavailable, found.error());
  }
  const std::map<std::string, std::string>& reports = *found;
  if (reports.empty()) {
    return error(req, http::status::not_found, "no run " + run + " in namespace " + ns);
  }
  // The stored reports are JSON this handler checked at put: spliced in, not re-parsed.
  std::string body = json{{"namespace", ns}, {"run", run}}.dump();
  body.pop_back();
  body += R"(,"reports":{)";
  bool first = true;
  for (const auto& [rank, text] : reports) {
    body += (first ? "" : ",") + json(rank).dump() + ":" + text;
    first = false;
  }
  body += "}}";
  return make(req, http::status::ok, std::move(body), protocol::wire::kJsonContentType);
}

} // namespace kcache::service
