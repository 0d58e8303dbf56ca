#pragma once
// One line per request at info level through spdlog: method, route, key,
// status, bytes in and out, handling time and the token's name (never the
// token, never the query string). "text" goes through the daemon's logger
// (its format, --log-level); "json" is one JSON object a line (with "time",
// UTC) on stdout, where the daemon logs, for log shippers, written when the
// daemon logs at info; "off" writes nothing.
//
// The route is the route table's pattern ("/v1/artifacts/{key}") with the key
// it captured, shortened to its first kMaxKeyChars; a path no route serves is
// logged shortened too, and any byte outside printable ASCII becomes '?', so
// a request cannot forge log lines. A line is formatted into spdlog's stack
// buffer: nothing is allocated for it unless it is long.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace spdlog {
class logger;
}

namespace kcache::service {

enum class AccessLogMode : std::uint8_t { kOff, kText, kJson };
std::optional<AccessLogMode> parse_access_log_mode(std::string_view text);
std::string_view access_log_mode_name(AccessLogMode mode);

struct AccessRecord {
  std::string_view method;
  std::string_view route; // the route's pattern, or the path when no route matched
  std::string_view key;   // what the pattern captured; empty when none
  unsigned status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  std::int64_t micros = 0;
  std::string_view token; // the token's name ("anonymous" without tokens)
};

inline constexpr std::size_t kMaxKeyChars = 48;

class AccessLog {
public:
  explicit AccessLog(AccessLogMode mode = AccessLogMode::kOff);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  AccessLogMode mode() const { return mode_; }
  void write(const AccessRecord& record) const;

private:
  AccessLogMode mode_;
  std::shared_ptr<spdlog::logger> json_; // json: its own sink and pattern (nothing but the object)
};

} // namespace kcache::service
