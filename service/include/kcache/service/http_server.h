#pragma once
// HTTP/1.1 with keep-alive on Boost.Beast, over TCP and a Unix socket.
//
// Beast's parser limits bound every request (header bytes, body bytes); a
// request over a limit gets 431 or 413, a malformed one 400, and the
// connection is closed; the server goes on serving. Connections beyond
// max_connections get 503. drain() stops accepting, closes idle connections,
// lets in-flight requests finish (answered with "Connection: close"), and calls
// back once none remain or the drain timeout passed.
//
// Requests are handled on the I/O threads. A handler answers through its
// Responder, at once (the cache routes: memory and RocksDB tiers are fast, slow
// tiers carry their own deadlines) or later from any thread (a long-poll on a
// job); the connection waits for that answer without holding a thread.

#include <kcache/service/config.h>
#include <kcache/service/request_handler.h>

#include <boost/asio/io_context.hpp>
#include <tl/expected.hpp>

#include <functional>
#include <memory>
#include <string>

namespace kcache::service {

class HttpServer {
public:
  using Handler = std::function<void(Request&&, Responder)>;

  HttpServer(boost::asio::io_context& io, Handler handler, Limits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "host:port"; port 0 picks a free one (see tcp_port()).
  tl::expected<void, std::string> listen_tcp(const std::string& address);
  tl::expected<void, std::string> listen_unix(const std::string& path);
  std::uint16_t tcp_port() const;

  void drain(std::function<void()> on_drained);

  struct State; // shared with sessions; defined in the .cpp

private:
  std::shared_ptr<State> state_;
};

} // namespace kcache::service
