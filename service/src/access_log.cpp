#include <kcache/service/access_log.h>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <array>

namespace kcache::service {

namespace {

// `text`'s first `max` bytes, printable ASCII only, with "..." when cut;
// quotes and backslashes become '?' too, so it needs no JSON escaping.
struct Clean {
  std::array<char, kMaxKeyChars + 3> buf{};
  std::size_t size = 0;
  std::string_view view() const { return {buf.data(), size}; }
};

Clean clean(std::string_view text) {
  Clean out;
  for (const char c : text.substr(0, kMaxKeyChars)) {
    out.buf[out.size++] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? c : '?';
  }
  if (text.size() > kMaxKeyChars) {
    for (int i = 0; i < 3; ++i) {
      out.buf[out.size++] = '.';
    }
  }
  return out;
}

} // namespace

std::optional<AccessLogMode> parse_access_log_mode(std::string_view text) {
  if (text == "off") {
    return AccessLogMode::kOff;
  }
  if (text == "text") {
    return AccessLogMode::kText;
  }
  if (text == "json") {
    return AccessLogMode::kJson;
  }
  return std::nullopt;
}

std::string_view access_log_mode_name(AccessLogMode mode) {
  switch (mode) {
  case AccessLogMode::kText:
    return "text";
  case AccessLogMode::kJson:
    return "json";
  case AccessLogMode::kOff:
    break;
  }
  return "off";
}

AccessLog::AccessLog(AccessLogMode mode) : mode_(mode) {
  if (mode == AccessLogMode::kJson) {
    // Not registered with spdlog: this handler's own, no global state.
    json_ = std::make_shared<spdlog::logger>("access",
                                             std::make_shared<spdlog::sinks::stdout_sink_mt>());
    json_->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ",%v})", spdlog::pattern_time_type::utc);
  }
}

AccessLog::~AccessLog() = default;

void AccessLog::write(const AccessRecord& r) const {
  if (mode_ == AccessLogMode::kOff || !spdlog::should_log(spdlog::level::info)) {
    return;
  }
  const Clean route = clean(r.route);
  const Clean key = clean(r.key);
  const Clean token = clean(r.token);
  if (json_) {
    json_->info(R"("method":"{}","route":"{}","key":"{}","status":{},"bytes_in":{},)"
                R"("bytes_out":{},"us":{},"token":"{}")",
                r.method, route.view(), key.view(), r.status, r.bytes_in, r.bytes_out, r.micros,
                token.view());
    return;
  }
  spdlog::info("{} {}{}{} {} in={} out={} {}us token={}", r.method, route.view(),
               r.key.empty() ? "" : " key=", key.view(), r.status, r.bytes_in, r.bytes_out,
               r.micros, token.view());
}

} // namespace kcache::service
