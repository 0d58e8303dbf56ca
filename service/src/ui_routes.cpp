// The dashboard's routes (docs/DASHBOARD.md): its embedded files under /ui/,
// the per-minute history its charts draw (GET /v1/stats/history) and what the
// viewer's token may do (GET /v1/whoami).

#include "responses.h"
#include "ui_files.h"

#include <kcache/service/request_handler.h>
#include <kcache/service/tokens.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

namespace {

// The pages load only their own files: no inline script or style, no other
// origin, never framed (docs/DASHBOARD.md).
constexpr std::string_view kUiPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'";

std::string_view content_type_of(std::string_view path) {
  const auto dot = path.rfind('.');
  const std::string_view ext = dot == std::string_view::npos ? "" : path.substr(dot + 1);
  if (ext == "html") {
    return "text/html; charset=utf-8";
  }
  if (ext == "css") {
    return "text/css; charset=utf-8";
  }
  if (ext == "js") {
    return "text/javascript; charset=utf-8";
  }
  if (ext == "svg") {
    return "image/svg+xml";
  }
  return "application/octet-stream";
}

const EmbeddedFile* find_ui_file(std::string_view path) {
  for (const EmbeddedFile& file : embedded_ui_files()) {
    if (file.path == path) {
      return &file;
    }
  }
  return nullptr;
}

Response ui_response(const Request& req, http::status status, std::string_view body,
                     std::string_view content_type) {
  Response res = make(req, status, std::string(body), content_type);
  res.set("Content-Security-Policy", kUiPolicy);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  // Small files: always revalidated, so an upgraded kcached serves its own.
  res.set(http::field::cache_control, "no-cache");
  return res;
}

} // namespace

Response RequestHandler::ui_file(const Request& req, const RouteArgs& args) {
  const std::string_view path = args.param.empty() ? "index.html" : args.param;
  const EmbeddedFile* file = find_ui_file(path);
  if (file == nullptr) {
    return ui_response(req, http::status::not_found, "not found\n", "text/plain; charset=utf-8");
  }
  const std::string_view type = content_type_of(path);
  // Scripts and styles are the same public code in every kcached; a page is
  // what a token views. A browser's navigation carries no bearer token, so a
  // page without one is 401 with the page itself as the body: it asks for the
  // token and sends it on its fetches, which carry the data.
  if (!tokens_.empty() && type.starts_with("text/html")) {
    const auto bearer = bearer_token(req[http::field::authorization]);
    const Token* token = bearer ? find_token(tokens_, *bearer) : nullptr;
    if (token == nullptr ||
        !principals_[static_cast<std::size_t>(token - tokens_.data())].may_somewhere(Role::kRead)) {
      Response res = ui_response(req, http::status::unauthorized, file->body, type);
      res.set(http::field::www_authenticate, "Bearer");
      return res;
    }
  }
  return ui_response(req, http::status::ok, file->body, type);
}

Response RequestHandler::whoami(const Request& req, const RouteArgs& args) {
  // What the dashboard shows to whom: its admin buttons need admin on "*"
  // (gc, verify), its cancel buttons submit somewhere. The server checks each
  // request anyway; this only spares a person buttons that would be refused.
  nlohmann::json grants = nlohmann::json::array();
  for (const RoleGrant& grant : args.who.roles) {
    grants.push_back({{"pattern", grant.pattern}, {"role", role_name(grant.role)}});
  }
  nlohmann::json everywhere = nlohmann::json::object();
  nlohmann::json somewhere = nlohmann::json::object();
  for (const Role role : {Role::kRead, Role::kSubmit, Role::kWrite, Role::kAdmin}) {
    everywhere[std::string(role_name(role))] = args.who.may_everywhere(role);
    somewhere[std::string(role_name(role))] = args.who.may_somewhere(role);
  }
  return json_response(req, http::status::ok,
                       nlohmann::json{{"name", args.who.name},
                                      {"tokens", !tokens_.empty()},
                                      {"grants", std::move(grants)},
                                      {"everywhere", std::move(everywhere)},
                                      {"somewhere", std::move(somewhere)}});
}

Response RequestHandler::stats_history(const Request& req, const RouteArgs& args) {
  std::size_t minutes = 60;
  if (const std::string text = args.query.get("minutes"); !text.empty()) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), minutes);
    if (ec != std::errc() || ptr != text.data() + text.size() || minutes == 0 ||
        minutes > history_.capacity()) {
      return error(req, http::status::bad_request,
                   "minutes must be 1 to " + std::to_string(history_.capacity()));
    }
  }
  const std::int64_t now_ms = storage::unix_now_ms();
  const std::vector<MinuteCounts> rows = history_.series(now_ms, store_.counters(), minutes);
  // One array per counter, oldest minute first: 1440 minutes stay small.
  nlohmann::json hits = nlohmann::json::array();
  nlohmann::json misses = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  nlohmann::json puts = nlohmann::json::array();
  nlohmann::json bytes = nlohmann::json::array();
  for (const MinuteCounts& row : rows) {
    hits.push_back(row.hits);
    misses.push_back(row.misses);
    errors.push_back(row.errors);
    puts.push_back(row.puts);
    bytes.push_back(row.bytes_served);
  }
  return json_response(req, http::status::ok,
                       nlohmann::json{{"now_ms", now_ms},
                                      {"start_ms", rows.empty() ? 0 : rows.front().minute * 60'000},
                                      {"step_s", 60},
                                      {"minutes", rows.size()},
                                      {"hits", std::move(hits)},
                                      {"misses", std::move(misses)},
                                      {"errors", std::move(errors)},
                                      {"puts", std::move(puts)},
                                      {"bytes_served", std::move(bytes)}});
}

} // namespace kcache::service
