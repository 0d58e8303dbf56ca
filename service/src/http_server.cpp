#include "artifact_body.h"
#include "io_pool.h"
#include "upload_spool.h"

#include <kcache/protocol/json_text.h>
#include <kcache/protocol/tls_stream.h>
#include <kcache/service/http_server.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <grp.h>
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kcache::service {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

// Bytes held across connections, under a cap. One reservation larger than the
// cap passes when nothing else is held, so a request or response of the
// largest allowed size is never refused forever: usage stays under
// max(cap, the largest single reservation).
class Budget {
public:
  explicit Budget(std::uint64_t cap) : cap_(cap) {}
  bool try_reserve(std::uint64_t bytes) {
    std::uint64_t used = used_.load();
    do {
      if (used != 0 && used + bytes > cap_) {
        return false;
      }
    } while (!used_.compare_exchange_weak(used, used + bytes));
    return true;
  }
  void release(std::uint64_t bytes) { used_.fetch_sub(bytes); }
  std::uint64_t used() const { return used_.load(); }

private:
  const std::uint64_t cap_;
  std::atomic<std::uint64_t> used_{0};
};

class SessionBase {
public:
  virtual ~SessionBase() = default;
  virtual void on_drain() = 0;
  // Closes the connection to make room for a new one.
  virtual void evict() = 0;

  std::string peer; // the remote address; "" for the Unix socket (not capped per peer)
  std::chrono::steady_clock::time_point accepted = std::chrono::steady_clock::now();
  // Set once a request head has been admitted; under State::mu.
  bool established = false;
  bool evicting = false;
};

struct HttpServer::State {
  asio::io_context& io;
  Handler handler;
  Admit admit;
  Limits limits;
  std::optional<tcp::acceptor> tcp_acceptor;
  // Set: the TCP listener speaks TLS. SIGHUP swaps in a new context; an open
  // connection holds the one it was accepted with.
  std::shared_ptr<ssl::context> tls;
  std::mutex tls_mu;
  std::optional<unix_stream::acceptor> unix_acceptor;
  std::string unix_path;
  HttpServer::Contexts contexts; // set: a context per connection (io_pool.h)
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> draining{false};
  std::mutex mu;
  std::unordered_set<SessionBase*> sessions;                 // registered while alive
  std::unordered_map<std::string, std::size_t> per_peer;     // open connections by address
  std::unordered_map<std::string, std::uint64_t> peer_sends; // send-budget bytes by address
  std::function<void()> on_drained;
  std::optional<asio::steady_timer> drain_timer;
  Budget body_budget;
  Budget send_budget;
  std::shared_ptr<SpoolQuota> spool_quota; // shared with spools, which may outlive the server
  std::atomic<std::int64_t> last_trim_ms{0};
  // Shared with a pending trim's timer, which may outlive the server.
  std::shared_ptr<std::atomic<bool>> trim_pending = std::make_shared<std::atomic<bool>>(false);

  MetricsRegistry own_metrics; // used when the server was given none
  Counter& refused_max_connections;
  Counter& refused_per_peer;
  Counter& evicted;
  Counter& header_timeouts;
  Counter& stall_timeouts;
  Counter& body_budget_refusals;
  Counter& send_budget_refusals;
  Counter& spool_refusals;
  Counter& spooled_uploads;
  Counter& early_rejections;
  Counter& tls_handshake_failures;

  State(asio::io_context& io_context, Handler h, Admit a, const Limits& l, MetricsRegistry* m)
      : io(io_context), handler(std::move(h)), admit(std::move(a)), limits(l),
        body_budget(l.body_memory_bytes), send_budget(l.send_memory_bytes),
        spool_quota(std::make_shared<SpoolQuota>(l.spool_disk_bytes)),
        refused_max_connections(registry(m).counter("kcache_http_connections_refused_total",
                                                    "Connections answered 503 at accept, by reason",
                                                    {{"reason", "max_connections"}})),
        refused_per_peer(registry(m).counter("kcache_http_connections_refused_total",
                                             "Connections answered 503 at accept, by reason",
                                             {{"reason", "per_peer"}})),
        evicted(registry(m).counter(
            "kcache_http_connections_evicted_total",
            "Connections without an admitted request closed to make room for new ones")),
        header_timeouts(registry(m).counter(
            "kcache_http_header_timeouts_total",
            "Connections closed because a request head did not arrive within header_timeout")),
        stall_timeouts(registry(m).counter(
            "kcache_http_stall_timeouts_total",
            "Connections closed because a body read or a response write stalled")),
        body_budget_refusals(registry(m).counter(
            "kcache_http_budget_refusals_total",
            "Requests answered 503 because a memory budget was spent", {{"budget", "body"}})),
        send_budget_refusals(registry(m).counter(
            "kcache_http_budget_refusals_total",
            "Requests answered 503 because a memory budget was spent", {{"budget", "send"}})),
        spool_refusals(registry(m).counter(
            "kcache_http_spool_refusals_total",
            "Uploads refused because the upload spool was full (quota or disk) or failed")),
        spooled_uploads(registry(m).counter(
            "kcache_http_spooled_uploads_total",
            "Request bodies written to the upload spool on disk instead of memory")),
        early_rejections(registry(m).counter(
            "kcache_http_rejected_before_body_total",
            "Requests refused on their head (token, role, route, size) without reading the "
            "body")),
        tls_handshake_failures(registry(m).counter(
            "kcache_tls_handshake_failures_total",
            "TLS connections closed because the handshake failed (plain HTTP, an old TLS "
            "version, a client certificate missing or untrusted)")) {}

  MetricsRegistry& registry(MetricsRegistry* m) { return m != nullptr ? *m : own_metrics; }

  std::shared_ptr<ssl::context> tls_context() {
    std::lock_guard lock(tls_mu);
    return tls;
  }

  // Three quarters of the response memory in flight: a large answer built now
  // would most likely be refused after the work of loading it.
  // Or three quarters of the peer's share: one address's stalled readers
  // must not turn every other client's gets into 503s.
  bool sends_spent(const std::string& peer) {
    if (send_budget.used() >= limits.send_memory_bytes / 4 * 3) {
      return true;
    }
    std::lock_guard lock(mu);
    const auto it = peer_sends.find(peer);
    return it != peer_sends.end() && it->second >= limits.peer_send_cap() / 4 * 3;
  }

  // A response's bytes against both the global budget and its peer's share
  // (the Unix socket's local clients have no share). A peer holding nothing
  // may always reserve, as Budget lets one oversized reservation through.
  bool reserve_send(const std::string& peer, std::uint64_t bytes) {
    if (peer.empty()) {
      return send_budget.try_reserve(bytes);
    }
    std::lock_guard lock(mu);
    std::uint64_t& held = peer_sends[peer];
    if ((held != 0 && held + bytes > limits.peer_send_cap()) || !send_budget.try_reserve(bytes)) {
      if (held == 0) {
        peer_sends.erase(peer);
      }
      return false;
    }
    held += bytes;
    return true;
  }

  void release_send(const std::string& peer, std::uint64_t bytes) {
    send_budget.release(bytes);
    if (peer.empty()) {
      return;
    }
    std::lock_guard lock(mu);
    if (auto it = peer_sends.find(peer); it != peer_sends.end() && (it->second -= bytes) == 0) {
      peer_sends.erase(it);
    }
  }

  enum class Door { kOpen, kFull, kPeerFull };

  // Counts a new connection in, or says why not. When every slot is taken, the
  // oldest connection that has not yet had a request admitted gives its own.
  Door enter(SessionBase& session) {
    std::lock_guard lock(mu);
    if (!session.peer.empty() && limits.max_connections_per_peer > 0 &&
        per_peer[session.peer] >= limits.max_connections_per_peer) {
      if (per_peer[session.peer] == 0) {
        per_peer.erase(session.peer);
      }
      return Door::kPeerFull;
    }
    if (connections.load() >= limits.max_connections) {
      SessionBase* victim = nullptr;
      for (SessionBase* s : sessions) {
        if (!s->established && !s->evicting &&
            (victim == nullptr || s->accepted < victim->accepted)) {
          victim = s;
        }
      }
      if (victim == nullptr) {
        return Door::kFull;
      }
      // The victim leaves on its own strand; until then the count is one over.
      victim->evicting = true;
      victim->evict();
    }
    connections.fetch_add(1);
    if (!session.peer.empty()) {
      ++per_peer[session.peer];
    }
    sessions.insert(&session);
    return Door::kOpen;
  }

  void leave(SessionBase& session) {
    {
      std::lock_guard lock(mu);
      if (sessions.erase(&session) == 0) {
        return; // never entered
      }
      if (!session.peer.empty()) {
        if (auto it = per_peer.find(session.peer); it != per_peer.end() && --it->second == 0) {
          per_peer.erase(it);
        }
      }
      connections.fetch_sub(1);
    }
    finish_drain_if_done();
  }

  void mark_established(SessionBase& session) {
    std::lock_guard lock(mu);
    session.established = true;
  }

  // glibc keeps freed large blocks in its arenas; after a large body or
  // response is freed, give the pages back: at most once a second (a trim
  // walks every arena), and once more a second after the last such free.
  void trim_after_large_free() {
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    std::int64_t last = last_trim_ms.load();
    if (now_ms - last >= 1000 && last_trim_ms.compare_exchange_strong(last, now_ms)) {
      ::malloc_trim(0);
      return;
    }
    if (!trim_pending->exchange(true)) {
      auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::seconds(1));
      timer->async_wait([pending = trim_pending, timer](beast::error_code ec) {
        *pending = false;
        if (!ec) {
          ::malloc_trim(0);
        }
      });
    }
  }

  // Where connections are accepted: on io itself when they then move to a
  // context of their own (place()), else on the strand they keep.
  asio::any_io_executor accept_executor() {
    if (contexts) {
      return io.get_executor();
    }
    return asio::make_strand(io);
  }

  // An accepted connection on the context it will run on (its thread).
  template <typename Socket> Socket place(Socket accepted, beast::error_code& ec) {
    if (!contexts) {
      return accepted;
    }
    return move_to(std::move(accepted), contexts(), ec);
  }

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

// Bodies of methods that carry none are refused past this; responses up to it
// are not counted against the send budget (connections x this stays small).
constexpr std::uint64_t kSmallBytes = 64 << 10;
// Frees of at least this much are followed by a trim.
constexpr std::uint64_t kLargeBytes = 1 << 20;
// A spooled body is read from the socket this much at a time.
constexpr std::size_t kSpoolReadBytes = 256 << 10;
// A refused request's unread body is read and dropped this long at most, so
// the client sees the answer instead of a reset.
constexpr std::chrono::seconds kLinger{2};

Response plain_error(http::status status, const std::string& message) {
  Response res{status, 11};
  res.set(http::field::server, "kcached");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(false);
  res.body() = protocol::json_text(nlohmann::json{{"error", message}});
  res.prepare_payload();
  return res;
}

Response busy(const std::string& message) {
  Response res = plain_error(http::status::service_unavailable, message);
  res.set(http::field::retry_after, "1");
  return res;
}

// The upload routes (a CAS blob's bytes, an artifact's parts): a large body
// is spooled to disk and read back from there a chunk at a time. Routes that
// parse their body as JSON keep it in memory under their own limits.
// `length`: the Content-Length, none for a chunked body (of unknown length).
bool spools(const Request& head, const boost::optional<std::uint64_t>& length,
            const Limits& limits) {
  if (limits.spool_dir.empty() || head.method() != http::verb::put ||
      !(head.target().starts_with("/v1/cas/") || head.target().starts_with("/v1/artifacts/"))) {
    return false;
  }
  return !length || *length > limits.spool_threshold_bytes;
}

bool carries_no_body(http::verb method) {
  return method == http::verb::get || method == http::verb::head || method == http::verb::delete_ ||
         method == http::verb::options;
}

std::string peer_address(const tcp::socket& socket) {
  beast::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  return ec ? std::string("?") : endpoint.address().to_string();
}

std::string peer_address(const unix_stream::socket& /*socket*/) {
  return ""; // local clients: not capped per peer
}

// One connection. With kTls, HTTP runs over a TlsStream whose handshake
// shares the request head's deadline, so every limit below applies to TLS
// connections the same.
template <typename Protocol, bool kTls = false>
class Session final : public SessionBase,
                      public std::enable_shared_from_this<Session<Protocol, kTls>> {
public:
  using Plain = beast::basic_stream<Protocol>;
  using Stream = std::conditional_t<kTls, protocol::TlsStream<Plain>, Plain>;

  Session(typename Protocol::socket socket,
          std::shared_ptr<HttpServer::State> state) requires(!kTls)
      : stream_(std::move(socket)), state_(std::move(state)) {
    init();
  }

  Session(typename Protocol::socket socket, std::shared_ptr<HttpServer::State> state,
          std::shared_ptr<ssl::context> tls) requires(kTls)
      : tls_(std::move(tls)), stream_(std::move(socket), *tls_), state_(std::move(state)) {
    init();
  }

  ~Session() override {
    release_budgets();
    state_->leave(*this);
  }

  typename Protocol::socket& socket() { return layer().socket(); }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->handshake();
      } else {
        self->read_request();
      }
    });
  }

  void on_drain() override {
    asio::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      if (auto self = weak.lock(); self && self->idle_) {
        self->shut();
      }
    });
  }

  void evict() override {
    asio::post(stream_.get_executor(), [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) {
        self->state_->evicted.inc();
        self->shut();
      }
    });
  }

private:
  void init() {
    peer = peer_address(layer().socket());
    buffer_.reserve(16 << 10); // room for a request head in one read
    if constexpr (std::is_same_v<Protocol, tcp>) {
      // Every answer is written whole (its last write is never a fragment
      // worth holding back), and with Nagle a small write waits for the
      // peer's delayed ACK (40 ms): the second of two pipelined answers, the
      // small last write of a large TLS response (TlsStream::kMaxWriteBytes
      // each). hit_bench --pipeline 8 at 1 KiB: 2.9 k req/s, 44 ms a batch.
      beast::error_code ec;
      layer().socket().set_option(tcp::no_delay(true), ec);
    }
  }

  // The TCP (or Unix) stream under TLS, or the stream itself: its deadline
  // and socket.
  Plain& layer() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  void handshake() {
    layer().expires_at(accepted + state_->limits.header_timeout);
    stream_.async_handshake(
        ssl::stream_base::server,
        [self = this->shared_from_this()](beast::error_code ec) { self->on_handshake(ec); });
  }

  void on_handshake(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      state_->header_timeouts.inc();
      return close();
    }
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        state_->tls_handshake_failures.inc();
        spdlog::debug("TLS handshake with {} failed: {}", peer, ec.message());
      }
      return close();
    }
    read_request();
  }

  void shut() {
    notify_close();
    beast::error_code ec;
    layer().socket().shutdown(Protocol::socket::shutdown_both, ec);
    layer().close();
  }

  void read_request() {
    spool_parser_.reset();
    spool_.reset();
    parser_.emplace();
    parser_->header_limit(state_->limits.max_header_bytes);
    // The body's limit is set once the head is admitted: a Content-Length
    // over it must not be answered before the token is checked. (Not
    // boost::none: Boost 1.74 compares a length with an empty optional as over.)
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    idle_ = buffer_.size() == 0;
    // A new connection has header_timeout from its accept to send its
    // request head (the TLS handshake included); a keep-alive one may first
    // sit idle.
    if (requests_ == 0) {
      layer().expires_at(accepted + state_->limits.header_timeout);
    } else {
      layer().expires_after(state_->limits.idle_timeout + state_->limits.header_timeout);
    }
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              self->on_header(ec);
                            });
  }

  // True when the error ends the connection quietly.
  bool gone(beast::error_code ec) const {
    return ec == http::error::end_of_stream || ec == asio::error::eof ||
           ec == beast::error::timeout || ec == asio::error::operation_aborted ||
           ec == asio::error::connection_reset || ec == asio::error::bad_descriptor ||
           ec == ssl::error::stream_truncated || ec.category() == asio::error::get_ssl_category();
  }

  void on_header(beast::error_code ec) {
    idle_ = false;
    if (ec == beast::error::timeout && requests_ == 0) {
      state_->header_timeouts.inc();
    }
    if (gone(ec)) {
      return close();
    }
    if (ec == http::error::header_limit) {
      return reject(http::status::request_header_fields_too_large,
                    "request header over the limit of " +
                        std::to_string(state_->limits.max_header_bytes) + " bytes");
    }
    if (ec) {
      return reject(http::status::bad_request, "malformed request: " + ec.message());
    }
    const Request& head = parser_->get();
    if (state_->admit) {
      std::optional<Response> refused;
      try {
        refused = state_->admit(head, state_->sends_spent(peer));
      } catch (const std::exception& e) {
        spdlog::error("admission threw: {}", e.what());
        refused = plain_error(http::status::internal_server_error, "internal error");
      }
      if (refused) {
        (refused->result() == http::status::service_unavailable ? state_->send_budget_refusals
                                                                : state_->early_rejections)
            .inc();
        refused->keep_alive(false);
        return write(std::move(*refused));
      }
    }
    state_->mark_established(*this);
    const std::uint64_t limit = carries_no_body(head.method())
                                    ? std::min(kSmallBytes, state_->limits.max_body_bytes)
                                    : state_->limits.max_body_bytes;
    if (parser_->content_length().value_or(0) > limit) {
      state_->early_rejections.inc();
      return reject(http::status::payload_too_large,
                    "request body over the limit of " + std::to_string(limit) + " bytes");
    }
    parser_->body_limit(limit);
    if (parser_->is_done()) {
      return dispatch();
    }
    if (spools(head, parser_->content_length(), state_->limits)) {
      return start_spool(limit);
    }
    // A known length is reserved whole (string_body allocates it at once); a
    // chunked body is charged as it grows.
    if (const auto length = parser_->content_length()) {
      if (!reserve_body(*length)) {
        return refuse_body();
      }
    }
    continue_then_read_body(head);
  }

  // Sends "100 Continue" when the client waits for it, then reads the body.
  void continue_then_read_body(const http::request_header<>& head) {
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      continue_.emplace(http::status::continue_, head.version());
      return http::async_write(
          stream_, *continue_,
          [self = this->shared_from_this()](beast::error_code write_ec, std::size_t) {
            self->continue_.reset();
            if (write_ec) {
              return self->close();
            }
            self->read_body();
          });
    }
    read_body();
  }

  bool reserve_body(std::uint64_t bytes) {
    if (!state_->body_budget.try_reserve(bytes)) {
      return false;
    }
    body_reserved_ += bytes;
    return true;
  }

  // The body goes to an unnamed file as it arrives (upload_spool.h): memory
  // holds one read buffer. A known length is reserved against the spool
  // quota up front, so a body that cannot fit is refused before it is read.
  void start_spool(std::uint64_t limit) {
    // Only a CAS blob's whole body is checked against a digest (its URL's).
    const bool hashing = parser_->get().target().starts_with("/v1/cas/");
    auto spool = UploadSpool::open(state_->limits.spool_dir, state_->spool_quota, hashing);
    if (!spool) {
      return refuse_spool(spool.error());
    }
    spool_ = std::move(*spool);
    if (const auto length = parser_->content_length(); length && !spool_->reserve(*length)) {
      return refuse_spool(
          {SpoolError::Code::kQuota, "the server's upload spool (" +
                                         std::to_string(state_->limits.spool_disk_bytes) +
                                         " bytes on disk) is full; retry later"});
    }
    if (const auto length = parser_->content_length()) {
      if (auto full = spool_->lacks_room_for(*length)) {
        return refuse_spool(*full);
      }
    }
    state_->spooled_uploads.inc();
    spool_parser_.emplace(std::move(*parser_));
    parser_.reset();
    spool_parser_->body_limit(limit);
    spool_buffer_.resize(kSpoolReadBytes);
    continue_then_read_body(spool_parser_->get());
  }

  void refuse_spool(const SpoolError& e) {
    state_->spool_refusals.inc();
    spool_.reset();
    switch (e.code) {
    case SpoolError::Code::kQuota:
      spdlog::info("refused an upload: {}", e.message);
      return write(busy(e.message));
    case SpoolError::Code::kNoSpace:
      spdlog::warn("refused an upload: {}", e.message);
      return write(plain_error(http::status::insufficient_storage, e.message));
    case SpoolError::Code::kIo:
      break;
    }
    spdlog::error("refused an upload: {}", e.message);
    write(plain_error(http::status::internal_server_error, e.message));
  }

  void read_spooled() {
    auto& body = spool_parser_->get().body();
    body.data = spool_buffer_.data();
    body.size = spool_buffer_.size();
    layer().expires_after(state_->limits.stall_timeout);
    http::async_read_some(stream_, buffer_, *spool_parser_,
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                            self->on_spooled(ec);
                          });
  }

  void on_spooled(beast::error_code ec) {
    if (ec == http::error::need_buffer) {
      ec = {}; // the buffer is full: written out below, then read again
    }
    if (body_read_failed(ec)) {
      return;
    }
    const std::size_t got = spool_buffer_.size() - spool_parser_->get().body().size;
    if (auto ok = spool_->append(std::string_view(spool_buffer_.data(), got)); !ok) {
      return refuse_spool(ok.error());
    }
    if (!spool_parser_->is_done()) {
      return read_spooled();
    }
    spool_->finish();
    dispatch();
  }

  // A body read's error answered (or the connection closed); false: none.
  bool body_read_failed(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      state_->stall_timeouts.inc();
    }
    if (gone(ec)) {
      close();
      return true;
    }
    if (ec == http::error::body_limit) {
      reject(http::status::payload_too_large, "request body over the limit of " +
                                                  std::to_string(state_->limits.max_body_bytes) +
                                                  " bytes");
      return true;
    }
    if (ec) {
      reject(http::status::bad_request, "malformed request: " + ec.message());
      return true;
    }
    return false;
  }

  void refuse_body() {
    state_->body_budget_refusals.inc();
    spdlog::info("refused a request body: the body memory budget ({} bytes) is spent",
                 state_->limits.body_memory_bytes);
    write(busy("the server's request body memory is spent; retry later"));
  }

  void read_body() {
    if (spool_parser_) {
      return read_spooled();
    }
    layer().expires_after(state_->limits.stall_timeout);
    http::async_read_some(stream_, buffer_, *parser_,
                          [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                            self->on_body(ec);
                          });
  }

  void on_body(beast::error_code ec) {
    if (body_read_failed(ec)) {
      return;
    }
    if (!parser_->content_length()) {
      const std::uint64_t held = parser_->get().body().capacity();
      if (held > body_reserved_ && !reserve_body(held - body_reserved_)) {
        return refuse_body();
      }
    }
    if (!parser_->is_done()) {
      return read_body();
    }
    dispatch();
  }

  void dispatch() {
    ++requests_;
    Request request = parser_ ? parser_->release() : spooled_request();
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

  // The spooled body travels with the request as its source (piece_body.h).
  Request spooled_request() {
    auto released = spool_parser_->release();
    spool_buffer_ = std::vector<char>(); // a keep-alive connection does not keep it
    Request request(std::move(released.base()));
    request.body().source = std::move(spool_);
    return request;
  }

  void respond(Response response) {
    // The handler is done with the request: its body no longer counts.
    release_body();
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
    // A streamed body holds at most its source's window at a time.
    const std::shared_ptr<BodySource>& source = response.body().source;
    const std::uint64_t size =
        source ? std::min(source->size(), source->window()) : response.body().size();
    if (size > kSmallBytes) {
      if (state_->reserve_send(peer, size)) {
        send_reserved_ = size;
      } else {
        state_->send_budget_refusals.inc();
        const bool keep_alive = response.keep_alive();
        response = busy("the server's response memory is spent; retry later");
        response.keep_alive(keep_alive);
      }
    }
    response_ = std::make_shared<Response>(std::move(response));
    serializer_.emplace(*response_);
    if (const auto* gathered = dynamic_cast<const GatheredBody*>(response_->body().source.get())) {
      return write_gathered(*gathered);
    }
    write_some();
  }

  // The head, as Beast's serializer writes it, and the body's pieces in one
  // gathered write: the serializer would write each piece of a source on
  // its own (a write, and a wake-up of the client, per piece).
  void write_gathered(const GatheredBody& body) {
    serializer_->split(true);
    std::vector<asio::const_buffer> buffers;
    beast::error_code ec;
    serializer_->next(ec, [&](beast::error_code&, const auto& head) {
      for (const asio::const_buffer b : beast::buffers_range_ref(head)) {
        buffers.push_back(b);
      }
    });
    if (ec) {
      return written(ec);
    }
    buffers.insert(buffers.end(), body.buffers().begin(), body.buffers().end());
    gathered_.emplace(std::move(buffers));
    write_gathered_some();
  }

  // As write_some: each write has its own deadline.
  void write_gathered_some() {
    layer().expires_after(state_->limits.stall_timeout);
    stream_.async_write_some(
        *gathered_, [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
          if (ec == beast::error::timeout) {
            self->state_->stall_timeouts.inc();
          }
          if (!ec) {
            self->gathered_->consume(n);
            if (beast::buffer_bytes(*self->gathered_) > 0) {
              return self->write_gathered_some();
            }
          }
          self->gathered_.reset();
          self->written(ec);
        });
  }

  // One write at a time, each with its own deadline: a peer that reads slowly
  // but steadily is served; one that stops reading is cut off.
  void write_some() {
    layer().expires_after(state_->limits.stall_timeout);
    http::async_write_some(stream_, *serializer_,
                           [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                             self->on_write(ec);
                           });
  }

  void on_write(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      state_->stall_timeouts.inc();
    }
    if (!ec && !serializer_->is_done()) {
      return write_some();
    }
    written(ec);
  }

  // The response is out (or failed): what the connection does next.
  void written(beast::error_code ec) {
    const bool keep_alive = response_->keep_alive();
    serializer_.reset();
    response_.reset();
    release_send();
    if (ec) {
      return close();
    }
    if ((parser_ && !parser_->is_done()) || (spool_parser_ && !spool_parser_->is_done())) {
      return linger(); // answered on the head (or mid-body): the rest was never read
    }
    if (!keep_alive || state_->draining) {
      return close();
    }
    read_request();
  }

  // Reads and drops what the client still sends, for a moment, then closes:
  // closing with unread data would reset the connection and lose our answer.
  void linger() {
    notify_close();
    beast::error_code ec;
    layer().socket().shutdown(Protocol::socket::shutdown_send, ec);
    linger_buffer_.resize(16 << 10);
    layer().expires_after(kLinger);
    drop_input();
  }

  void drop_input() {
    stream_.async_read_some(asio::buffer(linger_buffer_),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (ec) {
                                return self->layer().close();
                              }
                              self->drop_input();
                            });
  }

  void close() {
    notify_close();
    beast::error_code ec;
    layer().socket().shutdown(Protocol::socket::shutdown_send, ec);
    layer().close();
  }

  // TLS: a close_notify before the TCP FIN, so the peer can tell our orderly
  // close from a cut connection (skipped after a failed handshake).
  void notify_close() {
    if constexpr (kTls) {
      stream_.send_close_notify(layer().socket());
    }
  }

  void release_body() {
    if (body_reserved_ > 0) {
      state_->body_budget.release(body_reserved_);
      if (body_reserved_ >= kLargeBytes) {
        state_->trim_after_large_free();
      }
      body_reserved_ = 0;
    }
  }

  void release_send() {
    if (send_reserved_ > 0) {
      state_->release_send(peer, send_reserved_);
      if (send_reserved_ >= kLargeBytes) {
        state_->trim_after_large_free();
      }
      send_reserved_ = 0;
    }
  }

  void release_budgets() {
    parser_.reset(); // frees a body still held before its bytes are released
    spool_parser_.reset();
    spool_.reset(); // the file goes with its fd
    release_body();
    release_send();
  }

  std::shared_ptr<ssl::context> tls_; // before stream_, which uses it; null without TLS
  Stream stream_;
  std::shared_ptr<HttpServer::State> state_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<Request::body_type>> parser_;
  // A body spooled to disk (spools()): read through a buffer_body parser
  // into spool_buffer_, then appended to spool_.
  std::optional<http::request_parser<http::buffer_body>> spool_parser_;
  std::vector<char> spool_buffer_;
  std::unique_ptr<UploadSpool> spool_;
  std::optional<http::response<http::empty_body>> continue_;
  std::shared_ptr<Response> response_;
  std::optional<http::response_serializer<Response::body_type>> serializer_;
  // A GatheredBody's response: the head and the body's pieces not yet written.
  std::optional<beast::buffers_suffix<std::vector<asio::const_buffer>>> gathered_;
  std::vector<char> linger_buffer_;
  std::uint64_t body_reserved_ = 0;
  std::uint64_t send_reserved_ = 0;
  std::uint64_t requests_ = 0;
  bool idle_ = true;
};

// Over a limit: a short answer, written synchronously, then the door closes.
template <typename Socket>
void turn_away(Socket& socket, Counter& counter, const std::string& message) {
  counter.inc();
  Response response = busy(message);
  beast::error_code ec;
  http::write(socket, response, ec);
  socket.close(ec);
}

template <typename S>
void open_session(const std::shared_ptr<HttpServer::State>& state, S& session) {
  switch (state->enter(*session)) {
  case HttpServer::State::Door::kOpen:
    session->start();
    break;
  case HttpServer::State::Door::kFull:
    turn_away(session->socket(), state->refused_max_connections, "too many connections");
    break;
  case HttpServer::State::Door::kPeerFull:
    turn_away(session->socket(), state->refused_per_peer, "too many connections from this address");
    break;
  }
}

template <typename Protocol, typename Acceptor>
void accept_loop(std::shared_ptr<HttpServer::State> state, Acceptor& acceptor) {
  acceptor.async_accept(
      state->accept_executor(),
      [state, &acceptor](beast::error_code ec, typename Protocol::socket accepted) {
        if (ec == asio::error::operation_aborted || state->draining) {
          return;
        }
        auto socket = state->place(std::move(accepted), ec);
        if (!ec) {
          std::shared_ptr<ssl::context> tls;
          if constexpr (std::is_same_v<Protocol, tcp>) {
            tls = state->tls_context(); // the Unix socket stays plain
          }
          if (tls) {
            auto session =
                std::make_shared<Session<Protocol, true>>(std::move(socket), state, std::move(tls));
            open_session(state, session);
          } else {
            auto session = std::make_shared<Session<Protocol>>(std::move(socket), state);
            open_session(state, session);
          }
        } else {
          spdlog::warn("accept failed: {}", ec.message());
        }
        accept_loop<Protocol>(state, acceptor);
      });
}

} // namespace

HttpServer::HttpServer(asio::io_context& io, Handler handler, const Limits& limits,
                       MetricsRegistry* metrics, Admit admit)
    : state_(std::make_shared<State>(io, std::move(handler), std::move(admit), limits, metrics)) {
  if (metrics != nullptr) {
    metrics->describe("kcache_http_connections", "gauge", "Open connections");
    metrics->describe("kcache_http_body_bytes_buffered", "gauge",
                      "Request body bytes held in memory (counted against body_memory)");
    metrics->describe("kcache_http_send_bytes_in_flight", "gauge",
                      "Response bytes being written (counted against send_memory)");
    metrics->describe("kcache_http_spool_bytes", "gauge",
                      "Upload bytes spooled on disk (counted against spool_disk)");
    metrics->add_collector(
        [weak = std::weak_ptr<State>(state_)](std::vector<MetricsRegistry::Sample>& out) {
          if (auto state = weak.lock()) {
            out.push_back(
                {"kcache_http_connections", {}, static_cast<double>(state->connections.load())});
            out.push_back({"kcache_http_body_bytes_buffered",
                           {},
                           static_cast<double>(state->body_budget.used())});
            out.push_back({"kcache_http_send_bytes_in_flight",
                           {},
                           static_cast<double>(state->send_budget.used())});
            out.push_back(
                {"kcache_http_spool_bytes", {}, static_cast<double>(state->spool_quota->used())});
          }
        });
  }
}

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
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2); // an IPv6 literal: "[::1]:7070"
  }
  beast::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    return tl::unexpected("listen address '" + address + "': " + ec.message());
  }
  // The whole rest must be the port: "7070x" is an error, not port 7070.
  const std::string_view port_text = std::string_view(address).substr(colon + 1);
  unsigned port = 0;
  const auto [end, parsed] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parsed != std::errc() || end != port_text.data() + port_text.size() || port > 65535) {
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

namespace {

// Before listen(): no client can connect through wider permissions first.
tl::expected<void, std::string> restrict_unix_socket(const std::string& path,
                                                     const UnixSocketAccess& access) {
  if (!access.group.empty()) {
    std::vector<char> buffer(16384);
    group entry{};
    group* found = nullptr;
    int rc = 0;
    // A group with many members needs a larger buffer (ERANGE).
    while ((rc = getgrnam_r(access.group.c_str(), &entry, buffer.data(), buffer.size(), &found)) ==
           ERANGE) {
      buffer.resize(buffer.size() * 2);
    }
    if (rc != 0 || found == nullptr) {
      return tl::unexpected("unix_socket_group: no group named '" + access.group + "'");
    }
    if (::chown(path.c_str(), static_cast<uid_t>(-1), found->gr_gid) != 0) {
      return tl::unexpected("cannot give unix socket " + path + " to group " + access.group + ": " +
                            std::strerror(errno));
    }
  }
  if (access.mode != 0 && ::chmod(path.c_str(), static_cast<mode_t>(access.mode)) != 0) {
    return tl::unexpected("cannot chmod unix socket " + path + ": " + std::strerror(errno));
  }
  return {};
}

} // namespace

tl::expected<void, std::string> HttpServer::listen_unix(const std::string& path,
                                                        const UnixSocketAccess& access) {
  std::error_code fs_ec;
  std::filesystem::remove(path, fs_ec); // a stale socket from an earlier run
  beast::error_code ec;
  auto& acceptor = state_->unix_acceptor.emplace(state_->io);
  const unix_stream::endpoint endpoint(path);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.bind(endpoint, ec);
  }
  if (ec) {
    return tl::unexpected("cannot listen on unix socket " + path + ": " + ec.message());
  }
  if (auto ok = restrict_unix_socket(path, access); !ok) {
    return ok;
  }
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return tl::unexpected("cannot listen on unix socket " + path + ": " + ec.message());
  }
  state_->unix_path = path;
  accept_loop<unix_stream>(state_, acceptor);
  return {};
}

void HttpServer::set_connection_contexts(Contexts next) {
  state_->contexts = std::move(next);
}

void HttpServer::set_tls_context(std::shared_ptr<TlsContext> context) {
  std::lock_guard lock(state_->tls_mu);
  state_->tls = std::move(context);
}

bool HttpServer::tls() const {
  std::lock_guard lock(state_->tls_mu);
  return state_->tls != nullptr;
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
