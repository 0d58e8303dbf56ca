#pragma once
// A minimal HTTP/1.1 client connection on Boost.Beast with deadlines, over TCP
// (plain or TLS) or a Unix socket. Used by Client; not thread-safe by itself.

#include <tl/expected.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kcache::client {

enum class ErrorCode {
  kUnavailable, // cannot connect, connection lost
  kTimeout,     // the deadline passed
  kRejected,    // the daemon answered 4xx (bad request, unauthorized, too large)
  kServer,      // the daemon answered 5xx (its storage could not answer)
  kProtocol,    // an answer that does not parse
  kInvalid,     // a bad argument on our side (malformed URL or key)
};
std::string_view error_code_name(ErrorCode code);

struct ClientError {
  ErrorCode code = ErrorCode::kUnavailable;
  int http_status = 0;
  std::string message;
};

template <typename T> using Result = tl::expected<T, ClientError>;

enum class HttpMethod { kGet, kHead, kPut, kPost, kDelete };

struct HttpRequest {
  HttpMethod method = HttpMethod::kGet;
  std::string target;
  std::string body;
  std::string content_type;
  std::string token;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
};

// Where the daemon is: TCP host:port (tls: https://) or a Unix socket path.
struct Endpoint {
  bool is_unix = false;
  bool tls = false;
  std::string host;
  std::string port;
  std::string path;
};
Result<Endpoint> parse_endpoint(std::string_view url);

class Connection {
public:
  virtual ~Connection() = default;
  using Deadline = std::chrono::steady_clock::time_point;
  // Connects if needed. On any error the connection is closed and must be dropped.
  virtual Result<HttpResponse> round_trip(const HttpRequest& request, Deadline deadline,
                                          std::chrono::milliseconds connect_timeout) = 0;
  // True once it has completed a request (a failure on it may be a stale keep-alive).
  virtual bool reused() const = 0;
};

// What an https:// client trusts and shows. ca_file "": the system's default
// CA paths. client_cert_file/client_key_file: a certificate for mTLS.
struct TlsOptions {
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
};

// An OpenSSL client context (TLS 1.2+, peer verification), shared by a
// client's connections; each checks the server's name (or IP) against the
// certificate. Opaque here, so users of this header need no OpenSSL.
class TlsClientContext;
Result<std::shared_ptr<TlsClientContext>> make_tls_client_context(const TlsOptions& options);

// `tls` is required for an https:// endpoint and ignored otherwise.
std::unique_ptr<Connection> make_connection(const Endpoint& endpoint,
                                            std::shared_ptr<TlsClientContext> tls = nullptr);

} // namespace kcache::client
