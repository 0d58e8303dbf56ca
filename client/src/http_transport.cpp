#include <kcache/client/http_transport.h>
#include <kcache/protocol/tls_stream.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/un.h>

#include <limits>
#include <optional>

namespace kcache::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;

class TlsClientContext {
public:
  ssl::context context{ssl::context::tls_client};
};

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
    // sockaddr_un holds the path and its NUL: a longer one cannot be
    // connected to (Asio would throw length_error at the first request).
    if (constexpr std::size_t kMax = sizeof(sockaddr_un::sun_path) - 1; e.path.size() > kMax) {
      return tl::unexpected(ClientError{ErrorCode::kInvalid, 0,
                                        "unix:// socket path is " + std::to_string(e.path.size()) +
                                            " bytes, longer than the " + std::to_string(kMax) +
                                            " a Unix socket path can be: " + e.path});
    }
    return e;
  }
  e.tls = url.starts_with("https://");
  if (!e.tls && !url.starts_with("http://")) {
    return tl::unexpected(ClientError{
        ErrorCode::kInvalid, 0,
        "kcache URL must be http://host:port, https://host:port or unix:///path, got '" +
            std::string(url) + "'"});
  }
  std::string_view rest = url.substr(e.tls ? 8 : 7);
  rest = rest.substr(0, rest.find('/'));
  auto colon = rest.rfind(':');
  if (colon != std::string_view::npos && rest.find(']', colon) != std::string_view::npos) {
    colon = std::string_view::npos; // "[::1]" without a port
  }
  e.host = colon == std::string_view::npos ? rest : rest.substr(0, colon);
  if (e.host.size() >= 2 && e.host.front() == '[' && e.host.back() == ']') {
    e.host = e.host.substr(1, e.host.size() - 2); // an IPv6 literal
  }
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

// Why a handshake failed, with the certificate check's reason when that was it.
std::string handshake_error(const beast::error_code& ec, SSL* ssl) {
  std::string message = "kcached TLS handshake: " + ec.message();
  if (ssl != nullptr) {
    if (const long verify = SSL_get_verify_result(ssl); verify != X509_V_OK) {
      message += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
    }
  }
  ::ERR_clear_error();
  return message;
}

// With kTls, HTTP over a TlsStream: connect, then the handshake (SNI, the
// certificate checked against the URL's host), under the same deadlines.
template <typename Protocol, bool kTls = false> class BeastConnection final : public Connection {
public:
  using Plain = beast::basic_stream<Protocol>;
  using Stream = std::conditional_t<kTls, protocol::TlsStream<Plain>, Plain>;

  BeastConnection(Endpoint endpoint, std::shared_ptr<TlsClientContext> tls)
      : endpoint_(std::move(endpoint)), tls_(std::move(tls)) {
    // Beast reads into spare capacity: an empty buffer means ~512-byte reads
    // and a timer re-armed for each (130 syscalls per 64 KiB answer, measured).
    buffer_.reserve(kReadBufferBytes);
  }
  BeastConnection(const BeastConnection&) = delete;
  BeastConnection& operator=(const BeastConnection&) = delete;

  ~BeastConnection() override { close(Close::kOrderly); }

  Result<HttpResponse> round_trip(const HttpRequest& request, Deadline deadline,
                                  std::chrono::milliseconds connect_timeout) override {
    if (!stream_) {
      if (auto ok = connect(std::min(deadline, std::chrono::steady_clock::now() + connect_timeout));
          !ok) {
        return tl::unexpected(ok.error());
      }
      if constexpr (kTls) {
        if (auto ok = handshake(deadline); !ok) {
          return tl::unexpected(ok.error());
        }
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
    // The daemon bounds what it stores. (Not boost::none: Boost 1.74 compares
    // a Content-Length with an empty optional as over the limit.)
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    parser.skip(request.method == HttpMethod::kHead);
    layer().expires_at(deadline);
    if (const auto failed = exchange(req, parser, deadline)) {
      return tl::unexpected(transport_error(failed, "request"));
    }
    auto res = parser.release();
    ++completed_;
    if (!res.keep_alive()) {
      close(Close::kOrderly);
    }
    return HttpResponse{static_cast<int>(res.result_int()), std::move(res.body()),
                        std::string(res[http::field::content_type])};
  }

  bool reused() const override { return completed_ > 0; }

private:
  // Sends the request and reads the answer; returns the error, if any (the
  // connection is then closed). Plain connections read while they write:
  // kcached answers some requests on their head (413 over a size limit, 401)
  // and stops reading the body, so a client that reads only after its last
  // write sees its write reset and loses the answer (curl reads early too).
  // Over TLS the answer is read after the write: one SSL object, one
  // operation at a time.
  template <typename Parser>
  beast::error_code exchange(http::request<http::string_body>& req, Parser& parser,
                             Deadline deadline) {
    beast::error_code write_ec;
    beast::error_code read_ec;
    bool written = false;
    bool answered = false;
    int pending = 1;
    bool done = false;
    auto finish_one = [&] { done = --pending == 0; };
    auto start_read = [&] {
      ++pending;
      http::async_read(*stream_, buffer_, parser, [&](beast::error_code ec, std::size_t) {
        read_ec = ec;
        answered = !ec;
        if (answered && !written) {
          layer().cancel(); // answered early: the rest of the body is not wanted
        }
        finish_one();
      });
    };
    if constexpr (!kTls) {
      start_read();
    }
    http::async_write(*stream_, req, [&](beast::error_code ec, std::size_t) {
      write_ec = ec;
      written = true;
      if constexpr (kTls) {
        if (!ec) {
          start_read();
        }
      }
      finish_one();
    });
    run_until(deadline, done);
    if (!done) {
      close();
      return beast::error::timeout;
    }
    if (answered) {
      if (write_ec) {
        close(); // part of the body is still unsent: the connection cannot be reused
      }
      return {};
    }
    const beast::error_code failed = write_ec ? write_ec : read_ec;
    close();
    return failed ? failed : beast::error_code(beast::error::timeout);
  }

  Plain& layer() {
    if constexpr (kTls) {
      return stream_->next_layer();
    } else {
      return *stream_;
    }
  }

  Result<void> connect(Deadline deadline) {
    if constexpr (kTls) {
      if (!tls_) {
        return tl::unexpected(
            ClientError{ErrorCode::kInvalid, 0, "https:// without a TLS context"});
      }
      stream_.emplace(io_, tls_->context, kReadBufferBytes);
    } else {
      stream_.emplace(io_);
    }
    layer().expires_at(deadline);
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
      layer().async_connect(endpoints, [&](beast::error_code connect_ec, const auto&) {
        ec = connect_ec;
        done = true;
      });
    } else {
      layer().async_connect(typename Protocol::endpoint(endpoint_.path),
                            [&](beast::error_code connect_ec) {
                              ec = connect_ec;
                              done = true;
                            });
    }
    if (const auto failed = await(deadline, done, ec)) {
      return tl::unexpected(transport_error(failed, "connect"));
    }
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      layer().socket().set_option(asio::ip::tcp::no_delay(true), ec);
    }
    completed_ = 0;
    return {};
  }

  Result<void> handshake(Deadline deadline) {
    SSL* ssl = stream_->native_handle();
    beast::error_code ec;
    const auto ip = asio::ip::make_address(endpoint_.host, ec);
    bool named = false;
    if (ec) { // a DNS name: sent as SNI and matched against the certificate's names
      // SSL_set_tlsext_host_name, without its macro's C cast.
      named = SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                       endpoint_.host.data()) == 1 &&
              SSL_set1_host(ssl, endpoint_.host.c_str()) == 1;
    } else { // an IP address: matched against the certificate's IP addresses
      named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip.to_string().c_str()) == 1;
    }
    if (!named) {
      ::ERR_clear_error();
      close();
      return tl::unexpected(ClientError{ErrorCode::kInvalid, 0,
                                        "cannot verify TLS for host '" + endpoint_.host + "'"});
    }
    layer().expires_at(deadline);
    ec = {};
    bool done = false;
    stream_->async_handshake(ssl::stream_base::client, [&](beast::error_code handshake_ec) {
      ec = handshake_ec;
      done = true;
    });
    run_until(deadline, done);
    if (!done || ec) {
      const bool timeout = !done || ec == beast::error::timeout;
      std::string message = timeout ? "kcached TLS handshake: timed out" : handshake_error(ec, ssl);
      close();
      return tl::unexpected(
          ClientError{timeout ? ErrorCode::kTimeout : ErrorCode::kUnavailable, 0, message});
    }
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
      layer().socket().close(ec);
      io_.restart();
      io_.run_for(std::chrono::milliseconds(50));
    }
  }

  enum class Close { kFailed, kOrderly };

  // An orderly close over TLS sends close_notify first, so the server can
  // tell it from a cut connection.
  void close(Close how = Close::kFailed) {
    if (stream_) {
      if constexpr (kTls) {
        if (how == Close::kOrderly) {
          stream_->send_close_notify(layer().socket());
        }
      }
      beast::error_code ec;
      layer().socket().close(ec);
      stream_.reset();
    }
    buffer_.clear(); // keeps its capacity
  }

  Endpoint endpoint_;
  std::shared_ptr<TlsClientContext> tls_; // null without TLS
  asio::io_context io_{1};
  std::optional<Stream> stream_;
  beast::flat_buffer buffer_;
  std::size_t completed_ = 0;
};

} // namespace

Result<std::shared_ptr<TlsClientContext>> make_tls_client_context(const TlsOptions& options) {
  auto invalid = [](std::string message) {
    ::ERR_clear_error();
    return tl::unexpected(ClientError{ErrorCode::kInvalid, 0, std::move(message)});
  };
  std::shared_ptr<TlsClientContext> tls;
  try {
    tls = std::make_shared<TlsClientContext>();
  } catch (const boost::system::system_error& e) { // SSL_CTX_new failed: out of memory
    return invalid(std::string("cannot create a TLS context: ") + e.what());
  }
  SSL_CTX* native = tls->context.native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return invalid("cannot require TLS 1.2");
  }
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  beast::error_code ec;
  if (options.ca_file.empty()) {
    tls->context.set_default_verify_paths(ec);
  } else {
    tls->context.load_verify_file(options.ca_file, ec);
  }
  if (ec) {
    return invalid("CA file " + (options.ca_file.empty() ? "(system default)" : options.ca_file) +
                   ": " + ec.message());
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    return invalid("a client certificate needs both its certificate and its key file");
  }
  if (!options.client_cert_file.empty()) {
    tls->context.use_certificate_chain_file(options.client_cert_file, ec);
    if (ec) {
      return invalid("client certificate " + options.client_cert_file + ": " + ec.message());
    }
    tls->context.use_private_key_file(options.client_key_file, ssl::context::pem, ec);
    if (ec || SSL_CTX_check_private_key(native) != 1) {
      return invalid("client key " + options.client_key_file + ": " +
                     (ec ? ec.message() : "does not match the certificate"));
    }
  }
  tls->context.set_verify_mode(ssl::verify_peer);
  return tls;
}

std::unique_ptr<Connection> make_connection(const Endpoint& endpoint,
                                            std::shared_ptr<TlsClientContext> tls) {
  if (endpoint.is_unix) {
    return std::make_unique<BeastConnection<asio::local::stream_protocol>>(endpoint, nullptr);
  }
  if (endpoint.tls) {
    return std::make_unique<BeastConnection<asio::ip::tcp, true>>(endpoint, std::move(tls));
  }
  return std::make_unique<BeastConnection<asio::ip::tcp>>(endpoint, nullptr);
}

} // namespace kcache::client
