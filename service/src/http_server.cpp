#include <kcache/protocol/json_text.h>
#include <kcache/service/http_server.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <unordered_set>

namespace kcache::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

class SessionBase {
public:
  virtual ~SessionBase() = default;
  virtual void on_drain() = 0;
};

struct HttpServer::State {
  asio::io_context& io;
  Handler handler;
  Limits limits;
  std::optional<tcp::acceptor> tcp_acceptor;
  std::optional<unix_stream::acceptor> unix_acceptor;
  std::string unix_path;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> draining{false};
  std::mutex mu;
  std::unordered_set<SessionBase*> sessions; // registered while alive
  std::function<void()> on_drained;
  std::optional<asio::steady_timer> drain_timer;

  State(asio::io_context& io_context, Handler h, Limits l)
      : io(io_context), handler(std::move(h)), limits(l) {}

  void finish_drain_if_done() {
    std::function<void()> done;
    {
      std::lock_guard lock(mu);
      if (!draining || !sessions.empty() || !on_drained) {
        return;
      }
      done = std::move(on_drained);
      on_drained = nullptr;
    }
    if (drain_timer) {
      drain_timer->cancel();
    }
    done();
  }
};

namespace {

Response plain_error(http::status status, const std::string& message) {
  Response res{status, 11};
  res.set(http::field::server, "kcached");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(false);
  res.body() = protocol::json_text(nlohmann::json{{"error", message}});
  res.prepare_payload();
  return res;
}

template <typename Protocol>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Protocol>> {
public:
  using Stream = beast::basic_stream<Protocol>;

  Session(typename Protocol::socket socket, std::shared_ptr<HttpServer::State> state)
      : stream_(std::move(socket)), state_(std::move(state)) {
    buffer_.reserve(16 << 10); // room for a request head in one read
  }

  ~Session() override {
    {
      std::lock_guard lock(state_->mu);
      state_->sessions.erase(this);
    }
    state_->connections.fetch_sub(1);
    state_->finish_drain_if_done();
  }

  void start() {
    {
      std::lock_guard lock(state_->mu);
      state_->sessions.insert(this);
    }
    asio::dispatch(stream_.get_executor(),
                   [self = this->shared_from_this()] { self->read_request(); });
  }

  void on_drain() override {
    asio::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      if (auto self = weak.lock(); self && self->idle_) {
        beast::error_code ec;
        self->stream_.socket().shutdown(Protocol::socket::shutdown_both, ec);
        self->stream_.close();
      }
    });
  }

private:
  void read_request() {
    parser_.emplace();
    parser_->header_limit(state_->limits.max_header_bytes);
    parser_->body_limit(state_->limits.max_body_bytes);
    idle_ = buffer_.size() == 0;
    stream_.expires_after(state_->limits.idle_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       self->on_read(ec);
                     });
  }

  void on_read(beast::error_code ec) {
    idle_ = false;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
        ec == asio::error::bad_descriptor) {
      return close();
    }
    if (ec == http::error::body_limit) {
      return reject(http::status::payload_too_large,
                    "request body over the limit of " +
                        std::to_string(state_->limits.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return reject(http::status::request_header_fields_too_large,
                    "request header over the limit of " +
                        std::to_string(state_->limits.max_header_bytes) + " bytes");
    }
    if (ec) {
      return reject(http::status::bad_request, "malformed request: " + ec.message());
    }
    Request request = parser_->release();
    const std::string what =
        std::string(request.method_string()) + " " + std::string(request.target());
    // The answer may come later from another thread: it is handed back to this
    // session's strand, and the session stays alive until then.
    Responder respond([self = this->shared_from_this()](Response response) {
      asio::dispatch(
          self->stream_.get_executor(),
          [self, response = std::move(response)]() mutable { self->respond(std::move(response)); });
    });
    try {
      state_->handler(std::move(request), respond);
    } catch (const std::exception& e) {
      // Handlers return errors as values; this is the last line against a bug.
      spdlog::error("handler threw on {}: {}", what, e.what());
      respond(plain_error(http::status::internal_server_error, "internal error"));
    }
  }

  void respond(Response response) {
    if (state_->draining) {
      response.keep_alive(false);
    }
    write(std::move(response));
  }

  void reject(http::status status, const std::string& message) {
    spdlog::info("rejected a request: {}", message);
    write(plain_error(status, message));
  }

  void write(Response response) {
    response_ = std::make_shared<Response>(std::move(response));
    stream_.expires_after(state_->limits.idle_timeout);
    http::async_write(stream_, *response_,
                      [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                        self->on_write(ec);
                      });
  }

  void on_write(beast::error_code ec) {
    const bool keep_alive = response_->keep_alive();
    response_.reset();
    if (ec || !keep_alive || state_->draining) {
      return close();
    }
    read_request();
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(Protocol::socket::shutdown_send, ec);
    stream_.close();
  }

  Stream stream_;
  std::shared_ptr<HttpServer::State> state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<Response> response_;
  bool idle_ = true;
};

template <typename Protocol, typename Acceptor>
void accept_loop(std::shared_ptr<HttpServer::State> state, Acceptor& acceptor) {
  acceptor.async_accept(
      asio::make_strand(state->io),
      [state, &acceptor](beast::error_code ec, typename Protocol::socket socket) {
        if (ec == asio::error::operation_aborted || state->draining) {
          return;
        }
        if (!ec) {
          if (state->connections.fetch_add(1) >= state->limits.max_connections) {
            state->connections.fetch_sub(1);
            // Over the limit: a short answer, written synchronously, then the door closes.
            Response busy = plain_error(http::status::service_unavailable, "too many connections");
            beast::error_code write_ec;
            http::write(socket, busy, write_ec);
            socket.close(write_ec);
          } else {
            std::make_shared<Session<Protocol>>(std::move(socket), state)->start();
          }
        } else {
          spdlog::warn("accept failed: {}", ec.message());
        }
        accept_loop<Protocol>(state, acceptor);
      });
}

} // namespace

HttpServer::HttpServer(asio::io_context& io, Handler handler, Limits limits)
    : state_(std::make_shared<State>(io, std::move(handler), limits)) {}

HttpServer::~HttpServer() {
  beast::error_code ec;
  if (state_->tcp_acceptor) {
    state_->tcp_acceptor->close(ec);
  }
  if (state_->unix_acceptor) {
    state_->unix_acceptor->close(ec);
    std::error_code fs_ec;
    std::filesystem::remove(state_->unix_path, fs_ec);
  }
}

tl::expected<void, std::string> HttpServer::listen_tcp(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return tl::unexpected("listen address '" + address + "' is not host:port");
  }
  beast::error_code ec;
  const auto ip = asio::ip::make_address(address.substr(0, colon), ec);
  if (ec) {
    return tl::unexpected("listen address '" + address + "': " + ec.message());
  }
  unsigned long port = 0;
  try {
    port = std::stoul(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = 65536;
  }
  if (port > 65535) {
    return tl::unexpected("listen address '" + address + "' has a bad port");
  }
  auto& acceptor = state_->tcp_acceptor.emplace(state_->io);
  const tcp::endpoint endpoint(ip, static_cast<std::uint16_t>(port));
  acceptor.open(endpoint.protocol(), ec);
  acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  if (!ec) {
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return tl::unexpected("cannot listen on " + address + ": " + ec.message());
  }
  accept_loop<tcp>(state_, acceptor);
  return {};
}

tl::expected<void, std::string> HttpServer::listen_unix(const std::string& path) {
  std::error_code fs_ec;
  std::filesystem::remove(path, fs_ec); // a stale socket from an earlier run
  beast::error_code ec;
  auto& acceptor = state_->unix_acceptor.emplace(state_->io);
  const unix_stream::endpoint endpoint(path);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return tl::unexpected("cannot listen on unix socket " + path + ": " + ec.message());
  }
  state_->unix_path = path;
  accept_loop<unix_stream>(state_, acceptor);
  return {};
}

std::uint16_t HttpServer::tcp_port() const {
  beast::error_code ec;
  return state_->tcp_acceptor ? state_->tcp_acceptor->local_endpoint(ec).port() : 0;
}

void HttpServer::drain(std::function<void()> on_drained) {
  asio::post(state_->io, [state = state_, on_drained = std::move(on_drained)]() mutable {
    if (state->draining.exchange(true)) {
      return;
    }
    beast::error_code ec;
    if (state->tcp_acceptor) {
      state->tcp_acceptor->close(ec);
    }
    if (state->unix_acceptor) {
      state->unix_acceptor->close(ec);
    }
    {
      std::lock_guard lock(state->mu);
      state->on_drained = std::move(on_drained);
      for (SessionBase* s : state->sessions) {
        s->on_drain();
      }
    }
    state->drain_timer.emplace(state->io, state->limits.drain_timeout);
    state->drain_timer->async_wait([state](beast::error_code timer_ec) {
      if (timer_ec) {
        return; // cancelled: every session finished in time
      }
      std::function<void()> done;
      {
        std::lock_guard lock(state->mu);
        spdlog::warn("drain timeout: {} connections still open", state->sessions.size());
        done = std::move(state->on_drained);
        state->on_drained = nullptr;
      }
      if (done) {
        done();
      }
    });
    state->finish_drain_if_done();
  });
}

} // namespace kcache::service
