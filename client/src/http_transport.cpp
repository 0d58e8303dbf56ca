#include <kcache/client/http_transport.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <optional>

namespace kcache::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
  case ErrorCode::kUnavailable:
    return "unavailable";
  case ErrorCode::kTimeout:
    return "timeout";
  case ErrorCode::kRejected:
    return "rejected";
  case ErrorCode::kServer:
    return "server-error";
  case ErrorCode::kProtocol:
    return "protocol";
  case ErrorCode::kInvalid:
    return "invalid";
  }
  return "unknown";
}

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint e;
  if (url.starts_with("unix://")) {
    e.is_unix = true;
    e.path = url.substr(7);
    if (e.path.empty()) {
      return tl::unexpected(ClientError{ErrorCode::kInvalid, 0, "unix:// URL needs a socket path"});
    }
    return e;
  }
  if (!url.starts_with("http://")) {
    return tl::unexpected(ClientError{ErrorCode::kInvalid, 0,
                                      "kcache URL must be http://host:port or unix:///path, got '" +
                                          std::string(url) + "'"});
  }
  std::string_view rest = url.substr(7);
  rest = rest.substr(0, rest.find('/'));
  const auto colon = rest.rfind(':');
  e.host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
  e.port = colon == std::string_view::npos ? "7070" : std::string(rest.substr(colon + 1));
  if (e.host.empty() || e.port.empty()) {
    return tl::unexpected(ClientError{ErrorCode::kInvalid, 0, "kcache URL has no host or port"});
  }
  return e;
}

namespace {

http::verb to_verb(HttpMethod m) {
  switch (m) {
  case HttpMethod::kGet:
    return http::verb::get;
  case HttpMethod::kHead:
    return http::verb::head;
  case HttpMethod::kPut:
    return http::verb::put;
  case HttpMethod::kPost:
    return http::verb::post;
  case HttpMethod::kDelete:
    return http::verb::delete_;
  }
  return http::verb::get;
}

ClientError transport_error(const beast::error_code& ec, std::string_view during) {
  const bool timeout = ec == beast::error::timeout || ec == asio::error::timed_out;
  return ClientError{timeout ? ErrorCode::kTimeout : ErrorCode::kUnavailable, 0,
                     "kcached " + std::string(during) + ": " + ec.message()};
}

constexpr std::size_t kReadBufferBytes = 256 << 10;

template <typename Protocol> class BeastConnection final : public Connection {
public:
  explicit BeastConnection(Endpoint endpoint) : endpoint_(std::move(endpoint)) {
    // Beast reads into spare capacity: an empty buffer means ~512-byte reads
    // and a timer re-armed for each (130 syscalls per 64 KiB answer, measured).
    buffer_.reserve(kReadBufferBytes);
  }

  Result<HttpResponse> round_trip(const HttpRequest& request, Deadline deadline,
                                  std::chrono::milliseconds connect_timeout) override {
    if (!stream_) {
      if (auto ok = connect(std::min(deadline, std::chrono::steady_clock::now() + connect_timeout));
          !ok) {
        return tl::unexpected(ok.error());
      }
    }
    http::request<http::string_body> req{to_verb(request.method), request.target, 11};
    req.set(http::field::host, endpoint_.is_unix ? "localhost" : endpoint_.host);
    req.set(http::field::user_agent, "libkcache");
    if (!request.token.empty()) {
      req.set(http::field::authorization, "Bearer " + request.token);
    }
    if (!request.content_type.empty()) {
      req.set(http::field::content_type, request.content_type);
    }
    req.keep_alive(true);
    req.body() = request.body;
    req.prepare_payload();

    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none); // the daemon bounds what it stores
    parser.skip(request.method == HttpMethod::kHead);
    beast::error_code ec;
    bool done = false;
    stream_->expires_at(deadline);
    http::async_write(*stream_, req, [&](beast::error_code write_ec, std::size_t) {
      if (write_ec) {
        ec = write_ec;
        done = true;
        return;
      }
      http::async_read(*stream_, buffer_, parser, [&](beast::error_code read_ec, std::size_t) {
        ec = read_ec;
        done = true;
      });
    });
    if (const auto failed = await(deadline, done, ec)) {
      return tl::unexpected(transport_error(failed, "request"));
    }
    auto res = parser.release();
    ++completed_;
    if (!res.keep_alive()) {
      close();
    }
    return HttpResponse{static_cast<int>(res.result_int()), std::move(res.body()),
                        std::string(res[http::field::content_type])};
  }

  bool reused() const override { return completed_ > 0; }

private:
  Result<void> connect(Deadline deadline) {
    stream_.emplace(io_);
    stream_->expires_at(deadline);
    beast::error_code ec;
    bool done = false;
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      asio::ip::tcp::resolver resolver(io_);
      auto endpoints = resolver.resolve(endpoint_.host, endpoint_.port, ec);
      if (ec) {
        stream_.reset();
        return tl::unexpected(ClientError{
            ErrorCode::kUnavailable, 0, "cannot resolve " + endpoint_.host + ": " + ec.message()});
      }
      stream_->async_connect(endpoints, [&](beast::error_code connect_ec, const auto&) {
        ec = connect_ec;
        done = true;
      });
    } else {
      stream_->async_connect(typename Protocol::endpoint(endpoint_.path),
                             [&](beast::error_code connect_ec) {
                               ec = connect_ec;
                               done = true;
                             });
    }
    if (const auto failed = await(deadline, done, ec)) {
      return tl::unexpected(transport_error(failed, "connect"));
    }
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      stream_->socket().set_option(asio::ip::tcp::no_delay(true), ec);
    }
    completed_ = 0;
    return {};
  }

  // Waits for the operation started on our io_context; returns its error, or
  // timeout if it did not finish by the deadline. A failed connection is closed.
  beast::error_code await(Deadline deadline, const bool& done, const beast::error_code& ec) {
    run_until(deadline, done);
    const beast::error_code result = done ? ec : beast::error_code(beast::error::timeout);
    if (result) {
      close();
    }
    return result;
  }

  // Runs our private io_context until the operation completes; basic_stream's
  // expiry turns a missed deadline into beast::error::timeout.
  void run_until(Deadline deadline, const bool& done) {
    io_.restart();
    while (!done && io_.run_one_until(deadline + std::chrono::milliseconds(50)) > 0) {
    }
    if (!done && stream_) {
      // Cancel, and let the aborted handlers run while the stream still exists.
      beast::error_code ec;
      stream_->socket().close(ec);
      io_.restart();
      io_.run_for(std::chrono::milliseconds(50));
    }
  }

  void close() {
    if (stream_) {
      beast::error_code ec;
      stream_->socket().close(ec);
      stream_.reset();
    }
    buffer_.clear(); // keeps its capacity
  }

  Endpoint endpoint_;
  asio::io_context io_{1};
  std::optional<beast::basic_stream<Protocol>> stream_;
  beast::flat_buffer buffer_;
  std::size_t completed_ = 0;
};

} // namespace

std::unique_ptr<Connection> make_connection(const Endpoint& endpoint) {
  if (endpoint.is_unix) {
    return std::make_unique<BeastConnection<asio::local::stream_protocol>>(endpoint);
  }
  return std::make_unique<BeastConnection<asio::ip::tcp>>(endpoint);
}

} // namespace kcache::client
