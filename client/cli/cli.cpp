#include "cli.h"

#include <unistd.h>

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

// GET/POST/DELETE returning JSON; 404 -> kNotFound with the daemon's message.
int call_json(Cli& cli, HttpMethod method, const std::string& target, json& out) {
  auto res = cli.client->request(method, target);
  if (!res) {
    return fail(res.error());
  }
  const json body = parse_json_or_discarded(res->body);
  if (res->status == 404) {
    std::fprintf(stderr, "kcache: %s\n",
                 body.is_object() ? body.value("error", "not found").c_str() : "not found");
    return kNotFound;
  }
  if (res->status < 200 || res->status >= 300 || body.is_discarded()) {
    std::fprintf(stderr, "kcache: %d: %s\n", res->status,
                 body.is_object() ? body.value("error", res->body).c_str() : res->body.c_str());
    return kFailed;
  }
  out = body;
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
