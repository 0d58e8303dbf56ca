// Client's inspection and maintenance calls: stats, list, entry, verify, gc,
// jobs and remove_blob. The only place the client spells these paths and
// their queries; answers are read with protocol/admin.h's readers.

#include "responses.h"

#include <kcache/client/client.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/json_text.h>
#include <kcache/protocol/url.h>
#include <kcache/protocol/wire.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kcache::client {

using nlohmann::json;

namespace {

// target + "?name=value" or "&name=value", the value percent-encoded.
void append_query(std::string& target, std::string_view name, std::string_view value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  target.append(name).append("=").append(protocol::url_encode(value));
}

// A 200 answer's JSON read by `read` (one of admin.h's *_from_json).
template <typename Read>
auto read_answer(const Result<HttpResponse>& res, Read read)
    -> Result<typename decltype(read(json()))::value_type> {
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  auto value = read(protocol::parse_json_or_discarded(res->body));
  if (!value) {
    return tl::unexpected(
        ClientError{ErrorCode::kProtocol, res->status, "malformed answer: " + value.error()});
  }
  return std::move(*value);
}

} // namespace

Result<Stats> Client::stats() {
  return read_answer(request(HttpMethod::kGet, "/v1/stats"), protocol::stats_from_json);
}

Result<Stats> Client::zero_stats() {
  return read_answer(request(HttpMethod::kPost, "/v1/stats/zero"), protocol::stats_from_json);
}

Result<EntryList> Client::list(const ListQuery& query) {
  std::string target = "/v1/entries";
  if (!query.area.empty()) {
    append_query(target, "area", query.area);
  }
  if (!query.prefix.empty()) {
    append_query(target, "prefix", query.prefix);
  }
  if (!query.sort.empty()) {
    append_query(target, "sort", query.sort);
  }
  if (query.limit) {
    append_query(target, "limit", std::to_string(*query.limit));
  }
  return read_answer(request(HttpMethod::kGet, target), protocol::entry_list_from_json);
}

Result<Entry> Client::entry(std::string_view key) {
  if (auto ok = check_key(key); !ok) {
    return tl::unexpected(ok.error());
  }
  return read_answer(request(HttpMethod::kGet, "/v1/entries/" + std::string(key)),
                     protocol::entry_from_json);
}

Result<VerifyReport> Client::verify(const VerifyQuery& query) {
  std::string target = "/v1/admin/verify";
  append_query(target, "area", query.area);
  append_query(target, "prefix", query.prefix);
  append_query(target, "repair", query.repair ? "1" : "0");
  return read_answer(request(HttpMethod::kPost, target), protocol::verify_report_from_json);
}

Result<GcReport> Client::gc(const GcQuery& query) {
  std::string target = "/v1/admin/gc";
  if (query.max_size) {
    append_query(target, "max_size", std::to_string(*query.max_size));
  }
  if (query.older_than_s) {
    append_query(target, "older_than_s", std::to_string(*query.older_than_s));
  }
  return read_answer(request(HttpMethod::kPost, target), protocol::gc_report_from_json);
}

Result<JobList> Client::jobs(const JobsQuery& query) {
  std::string target = "/v1/jobs";
  if (query.limit) {
    append_query(target, "limit", std::to_string(*query.limit));
  }
  if (query.state) {
    append_query(target, "state", protocol::job_state_name(*query.state));
  }
  if (!query.logs) {
    append_query(target, "log", "0");
  }
  if (!query.since) {
    return read_answer(request(HttpMethod::kGet, target), protocol::job_list_from_json);
  }
  const auto wait = std::max(query.wait, std::chrono::milliseconds(0));
  append_query(target, "since", std::to_string(*query.since));
  append_query(target, "wait_ms", std::to_string(wait.count()));
  // The daemon may hold the answer up to `wait`: the deadline covers that too.
  return read_answer(
      round_trip(HttpRequest{HttpMethod::kGet, std::move(target), {}, {}, options_.token},
                 wait + options_.timeout),
      protocol::job_list_from_json);
}

Result<NodeList> Client::nodes() {
  return read_answer(request(HttpMethod::kGet, "/v1/nodes"), protocol::node_list_from_json);
}

Result<void> Client::remove_blob(std::string_view digest) {
  if (!protocol::wire::is_valid_cas_key(digest)) {
    return tl::unexpected(
        ClientError{ErrorCode::kInvalid, 0, "invalid blob digest (64 lower-case hex digits)"});
  }
  auto res = request(HttpMethod::kDelete, "/v1/cas/" + std::string(digest));
  if (!res) {
    return tl::unexpected(res.error());
  }
  if (res->status != 200) {
    return tl::unexpected(from_status(*res));
  }
  return {};
}

} // namespace kcache::client
