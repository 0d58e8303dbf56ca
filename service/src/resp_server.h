#pragma once
// kcached's RESP listener ([resp] listen, --resp-listen): Redis clients
// (redis-cli, redis-py, PyTorch's Redis remote caches, redis-benchmark) get
// and set cache entries with no kcache code installed. resp_commands.h says
// what each command does; this is the connection side, under the HTTP
// server's limits (config.h's Limits, one place for both):
//   max_connections / max_connections_per_peer  refused at accept (closed)
//   header_timeout   a new connection's first command
//   idle_timeout     between commands
//   stall_timeout    a reply write without progress
//   max_body_bytes   one bulk string (a SET's value): a longer declared length
//                    is refused on its header, before it is buffered
// Pipelined commands are answered in order; once kMaxPendingReply bytes of
// replies are waiting, no further command is read or run until they are
// written (back-pressure: a client that does not read stops being served).
// Plain TCP only (no TLS): Service refuses a non-loopback address while
// tokens are configured, unless allow_plain_http.

#include "resp_commands.h"

#include <kcache/service/config.h>
#include <kcache/service/metrics.h>

#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include <functional>
#include <memory>
#include <string>

namespace kcache::service {

class RespServer {
public:
  static constexpr std::size_t kMaxPendingReply = 1 << 20;

  RespServer(boost::asio::io_context& io, RespCommands& commands, const Limits& limits,
             MetricsRegistry& metrics);
  ~RespServer();
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // Before listen: the io_context each new connection goes to and stays on
  // (io_pool.h). Unset: connections run on strands of `io`.
  void set_connection_contexts(std::function<boost::asio::io_context&()> next);
  // "host:port"; port 0 picks a free one (see port()).
  tl::expected<void, std::string> listen(const std::string& address);
  std::uint16_t port() const;
  // Stops accepting and closes every connection (their replies cut short).
  void stop();

  struct State; // shared with sessions; defined in the .cpp

private:
  std::shared_ptr<State> state_;
};

} // namespace kcache::service
