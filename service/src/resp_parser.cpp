#include "resp_parser.h"

#include <algorithm>
#include <charconv>

namespace kcache::service {

namespace {

enum class Line { kOk, kNeedMore, kError };

// A "<prefix><digits>\r\n" header at `pos`: its number, and `pos` past it.
Line header(std::string_view in, std::size_t& pos, char prefix, std::size_t max_line,
            std::uint64_t& value) {
  if (pos >= in.size()) {
    return Line::kNeedMore;
  }
  if (in[pos] != prefix) {
    return Line::kError;
  }
  const std::size_t end = in.find("\r\n", pos + 1);
  if (end == std::string_view::npos) {
    // No line end yet: refuse a header longer than any valid one.
    return in.size() - pos > max_line ? Line::kError : Line::kNeedMore;
  }
  const std::string_view digits = in.substr(pos + 1, end - pos - 1);
  if (digits.empty() || digits.size() > 19) {
    return Line::kError;
  }
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) {
    return Line::kError; // also a sign: "-1" (a null) is no request argument
  }
  pos = end + 2;
  return Line::kOk;
}

} // namespace

RespParser::Status RespParser::parse(std::string_view in, std::vector<std::string>& args,
                                     std::size_t& consumed) {
  args.clear();
  consumed = 0;
  declared_ = 0;
  std::size_t pos = 0;
  std::uint64_t count = 0;
  auto fail = [&](std::string message) {
    error_ = std::move(message);
    args.clear();
    return Status::kError;
  };
  if (!in.empty() && in.front() != '*') {
    return fail("Protocol error: expected '*' (inline commands are not supported)");
  }
  switch (header(in, pos, '*', limits_.max_line_bytes, count)) {
  case Line::kNeedMore:
    return Status::kNeedMore;
  case Line::kError:
    return fail("Protocol error: invalid multibulk length");
  case Line::kOk:
    break;
  }
  if (count == 0 || count > limits_.max_args) {
    return fail("Protocol error: invalid multibulk length");
  }
  declared_ = pos;
  // Each argument takes at least "$0\r\n\r\n": no reservation past what the
  // bytes at hand could hold.
  args.reserve(std::min<std::uint64_t>(count, in.size() / 6 + 1));
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t length = 0;
    switch (header(in, pos, '$', limits_.max_line_bytes, length)) {
    case Line::kNeedMore:
      args.clear();
      return Status::kNeedMore;
    case Line::kError:
      return fail("Protocol error: expected '$' and a bulk length");
    case Line::kOk:
      break;
    }
    if (length > limits_.max_bulk_bytes) {
      return fail("Protocol error: invalid bulk length");
    }
    declared_ = pos + length + 2;
    if (declared_ > limits_.max_request_bytes) {
      return fail("Protocol error: the command is larger than the server accepts");
    }
    if (in.size() - pos < length + 2) {
      args.clear();
      return Status::kNeedMore;
    }
    if (in.substr(pos + length, 2) != "\r\n") {
      return fail("Protocol error: a bulk string does not end in CRLF");
    }
    args.emplace_back(in.substr(pos, length));
    pos += length + 2;
  }
  consumed = pos;
  return Status::kCommand;
}

} // namespace kcache::service
