// Client's calls for kcache.torch's compile reports (/v1/runs): a process's
// report put under namespace/run/rank, and the reports read back as the
// daemon's JSON (the CLI and the Python package render them).

#include "responses.h"

#include <kcache/client/client.h>
#include <kcache/protocol/url.h>

namespace kcache::client {

namespace {

// The answer's body when it is a 200, else its error.
Result<std::string> body_of(Result<HttpResponse> res) {
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return std::move(res->body);
}

std::string runs_path(std::initializer_list<std::string_view> names) {
  std::string path = "/v1/runs";
  for (const std::string_view name : names) {
    path.append("/").append(protocol::url_encode(name));
  }
  return path;
}

} // namespace

Result<void> Client::put_run_report(std::string_view ns, std::string_view run,
                                    std::string_view rank, std::string report_json) {
  auto body = body_of(request(HttpMethod::kPut, runs_path({ns, run, rank}), std::move(report_json),
                              "application/json"));
  if (!body) {
    return tl::unexpected(body.error());
  }
  return {};
}

Result<std::string> Client::runs(std::string_view ns, std::size_t limit) {
  std::string target = "/v1/runs?limit=" + std::to_string(limit);
  if (!ns.empty()) {
    target += "&namespace=" + protocol::url_encode(ns);
  }
  return body_of(request(HttpMethod::kGet, target));
}

Result<std::string> Client::run(std::string_view ns, std::string_view run) {
  return body_of(request(HttpMethod::kGet, runs_path({ns, run})));
}

} // namespace kcache::client
