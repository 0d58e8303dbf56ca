#pragma once
// An incremental parser for RESP requests: arrays of bulk strings
// ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"), as redis-cli, redis-py and
// redis-benchmark send them. Inline commands ("PING\r\n") are refused.
//
// Hand-written rather than hiredis' redisReader (already a dependency, and
// RESP requests are the same grammar as its replies): the hiredis here (0.14)
// has no cap on a bulk string's length or an array's count (the count is
// narrowed to int), accepts nested arrays, integers and errors that a request
// never holds, and only reports a bulk once all of it is buffered. Requests
// are untrusted: this parser refuses a length over its limits on the header
// alone, before a byte of the bulk is buffered or allocated.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::service {

struct RespLimits {
  std::uint64_t max_bulk_bytes = 512ULL << 20;    // one argument (a SET's value)
  std::size_t max_args = std::size_t{1} << 20;    // arguments of one command
  std::size_t max_line_bytes = 64;                // a "*N" or "$N" header line
  std::uint64_t max_request_bytes = 513ULL << 20; // one command, headers included
};

class RespParser {
public:
  enum class Status { kCommand, kNeedMore, kError };

  explicit RespParser(RespLimits limits) : limits_(limits) {}

  // Parses one command from the front of `in`. kCommand: `args` holds it and
  // `consumed` bytes of `in` were used. kNeedMore: nothing consumed; call
  // again with more bytes. kError: `error` says why; the stream cannot be
  // resynchronized (close the connection after answering).
  Status parse(std::string_view in, std::vector<std::string>& args, std::size_t& consumed);

  const std::string& error() const { return error_; }
  // Bytes the command being parsed declares so far (headers read): what the
  // caller is about to buffer.
  std::uint64_t declared_bytes() const { return declared_; }

private:
  RespLimits limits_;
  std::string error_;
  std::uint64_t declared_ = 0;
};

} // namespace kcache::service
