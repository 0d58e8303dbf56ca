#pragma once
// HTTP/1.1 with keep-alive on Boost.Beast, over TCP and a Unix socket.
//
// A request's head is read first, within header_timeout, and admitted (token,
// role, route) before a byte of its body is read: a refused request is
// answered (401/403/404/405/413) and the connection closed without buffering
// its body. Bodies are then read into memory under two budgets: one request at
// most max_body_bytes, all connections together at most body_memory (a body
// that does not fit gets 503 with Retry-After), except a raw-byte upload
// (PUT /v1/cas) over spool_threshold, which is written to an unnamed file as it
// arrives under the spool_disk quota (upload_spool.h) and handed to the route
// as the request body's source. Responses over 64 KiB count
// against send_memory the same way while they are being written; a body read
// or a response write that makes no progress for stall_timeout ends the
// connection. Connections are capped in all (max_connections) and per peer
// address (max_connections_per_peer); when all are taken, the oldest
// connection that has not yet sent an admitted request is closed to make room,
// so clients that have authenticated keep their slots under a flood of slow
// ones. A malformed request gets 400; the server goes on serving.
//
// drain() stops accepting, closes idle connections, lets in-flight requests
// finish (answered with "Connection: close"), and calls back once none remain
// or the drain timeout passed.
//
// With a TLS context set, the TCP listener speaks TLS (the Unix socket stays
// plain): the handshake must finish within header_timeout together with the
// request head, and every other limit applies unchanged. set_tls_context again
// (SIGHUP) gives new connections the new context; open ones keep theirs.
//
// Requests are handled on the I/O threads. A handler answers through its
// Responder, at once (the cache routes: memory and RocksDB tiers are fast, slow
// tiers carry their own deadlines) or later from any thread (a long-poll on a
// job); the connection waits for that answer without holding a thread.

#include <kcache/service/config.h>
#include <kcache/service/metrics.h>
#include <kcache/service/request_handler.h>
#include <kcache/service/tls_context.h>

#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace kcache::service {

// Who may connect to the Unix socket: mode 0 keeps what the umask gives; group
// "" keeps kcached's own group.
struct UnixSocketAccess {
  unsigned mode = 0;
  std::string group;
};

class HttpServer {
public:
  using Handler = std::function<void(Request&&, Responder)>;
  // Called with a request's head (its body not read yet): a response refuses
  // the request before its body is read; nullopt lets it in. `sends_spent`:
  // three quarters of send_memory, or of the peer's share of it, are in
  // flight, so a large answer would be refused after it was built.
  using Admit = std::function<std::optional<Response>(const Request& head, bool sends_spent)>;

  // `metrics` may be null (the server then counts for itself only).
  HttpServer(boost::asio::io_context& io, Handler handler, const Limits& limits,
             MetricsRegistry* metrics = nullptr, Admit admit = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "host:port"; port 0 picks a free one (see tcp_port()).
  tl::expected<void, std::string> listen_tcp(const std::string& address);
  tl::expected<void, std::string> listen_unix(const std::string& path,
                                              const UnixSocketAccess& access = {});
  std::uint16_t tcp_port() const;

  // Before listening: the io_context each new connection goes to (one per
  // I/O thread, io_pool.h); the connection stays on it, its handlers run on
  // that context's thread. Unset: connections run on strands of `io`.
  using Contexts = std::function<boost::asio::io_context&()>;
  void set_connection_contexts(Contexts next);

  // Before listen_tcp: TLS on the TCP listener. Later: a replacement (reload).
  void set_tls_context(std::shared_ptr<TlsContext> context);
  bool tls() const;

  void drain(std::function<void()> on_drained);

  struct State; // shared with sessions; defined in the .cpp

private:
  std::shared_ptr<State> state_;
};

} // namespace kcache::service
