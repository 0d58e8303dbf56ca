#include "cli.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>

namespace kcache::cli {

using client::ErrorCode;

int fail(const ClientError& e) {
  std::fprintf(stderr, "kcache: %s\n", e.message.c_str());
  switch (e.code) {
  case ErrorCode::kUnavailable:
  case ErrorCode::kTimeout:
    return kUnavailable;
  case ErrorCode::kInvalid:
    return kUsage;
  default:
    return kFailed;
  }
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "kcache: %s\n(kcache --help for usage)\n", message.c_str());
  return kUsage;
}

int fail_call(const ClientError& e) {
  if (e.http_status == 404) {
    std::fprintf(stderr, "kcache: %s\n", e.message.c_str());
    return kNotFound;
  }
  return fail(e);
}

int parse_count(const Cli& cli, const std::string& name, std::size_t fallback,
                std::optional<std::size_t>& out) {
  const std::string text = cli.option(name);
  std::size_t value = fallback;
  if (!text.empty()) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      return usage_error("--" + name + " takes a non-negative integer");
    }
  }
  out = value;
  return kOk;
}

void progress(const char* what, std::size_t done, std::size_t total) {
  if (isatty(STDERR_FILENO) == 0) {
    return;
  }
  constexpr std::size_t kWidth = 30;
  const std::size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::fprintf(stderr, "\r%-12s [%s%s] %zu/%zu", what, std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total);
  if (done == total) {
    std::fprintf(stderr, "\n");
  }
}

} // namespace kcache::cli
