// What RequestHandler notes after each response: cache lookups by namespace
// and kind (lookup_metrics.h) and the access log line (access_log.h).

#include <kcache/service/request_handler.h>
#include <kcache/service/routes.h>

#include <charconv>

namespace kcache::service {

namespace {

// The body's length as the head declared it (an upload's body may be spooled
// to disk, or not read yet when admit() refused it).
std::uint64_t bytes_in(const Request& request) {
  const auto header = request[http::field::content_length];
  std::uint64_t n = 0;
  if (std::from_chars(header.data(), header.data() + header.size(), n).ec == std::errc()) {
    return n;
  }
  return request.payload_size().value_or(0);
}

} // namespace

void RequestHandler::log_request(const Request& request, const Response& response,
                                 const Route* route, std::string_view path, std::string_view param,
                                 const Principal& who, std::chrono::steady_clock::duration took) {
  const unsigned status = response.result_int();
  // Reads of an artifact or an action record: 200 a hit, 404 a miss. A get
  // that waits for a lease's producer counts its first miss and then its
  // answer. Batch reads and RESP GETs are counted by the store only.
  if (route != nullptr && (status == 200 || status == 404) &&
      (route->label == "artifacts" || route->label == "ac") &&
      (request.method() == http::verb::get || request.method() == http::verb::head)) {
    lookups_.record(param, status == 200);
  }
  if (access_log_->mode() == AccessLogMode::kOff) {
    return;
  }
  access_log_->write(
      {.method = std::string_view(request.method_string().data(), request.method_string().size()),
       .route = route != nullptr ? route->pattern : path,
       .key = route != nullptr ? param : std::string_view{},
       .status = status,
       .bytes_in = bytes_in(request),
       .bytes_out = response.payload_size().value_or(0),
       .micros = std::chrono::duration_cast<std::chrono::microseconds>(took).count(),
       .token = who.name});
}

} // namespace kcache::service
