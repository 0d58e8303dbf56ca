#include "resp_server.h"

#include "io_pool.h"
#include "resp_parser.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace kcache::service {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Bytes read from the socket at a time.
constexpr std::size_t kReadBytes = 64 << 10;

// async_write's completion condition: each write offers every byte left.
// transfer_all caps a write at 64 KiB, so a 64 KiB value's reply left in two
// sends (and woke the client twice).
std::size_t whole_writes(const boost::system::error_code& ec, std::size_t /*written*/) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max();
}

} // namespace

class RespConnection;

struct RespServer::State {
  asio::io_context& io;
  RespCommands& commands;
  Limits limits;
  RespLimits parse_limits;
  std::optional<tcp::acceptor> acceptor;
  std::function<asio::io_context&()> contexts; // set: a context per connection
  std::mutex mu;
  bool stopped = false;
  std::unordered_map<RespConnection*, std::weak_ptr<RespConnection>> connections;
  std::unordered_map<std::string, std::size_t> per_peer;
  Counter& accepted;
  Counter& refused;
  Counter& timeouts;

  State(asio::io_context& io_context, RespCommands& c, const Limits& l, MetricsRegistry& m)
      : io(io_context), commands(c),
        limits(l), parse_limits{.max_bulk_bytes = l.max_body_bytes,
                                .max_args = std::size_t{1} << 20,
                                .max_line_bytes = 64,
                                .max_request_bytes = l.max_body_bytes + (1 << 20)},
        accepted(m.counter("kcache_resp_connections_total", "RESP connections accepted")),
        refused(m.counter("kcache_resp_connections_refused_total",
                          "RESP connections closed at accept: max_connections or the per-peer "
                          "cap reached")),
        timeouts(m.counter("kcache_resp_timeouts_total",
                           "RESP connections closed: no command within header_timeout or "
                           "idle_timeout, or a reply write stalled")) {}

  // Counts a connection in; false when a cap is reached.
  bool enter(RespConnection* c, const std::weak_ptr<RespConnection>& weak,
             const std::string& peer) {
    std::lock_guard lock(mu);
    if (stopped || connections.size() >= limits.max_connections ||
        (limits.max_connections_per_peer > 0 &&
         per_peer[peer] >= limits.max_connections_per_peer)) {
      if (per_peer[peer] == 0) {
        per_peer.erase(peer);
      }
      return false;
    }
    ++per_peer[peer];
    connections.emplace(c, weak);
    return true;
  }

  void leave(RespConnection* c, const std::string& peer) {
    std::lock_guard lock(mu);
    if (connections.erase(c) == 0) {
      return;
    }
    if (auto it = per_peer.find(peer); it != per_peer.end() && --it->second == 0) {
      per_peer.erase(it);
    }
  }
};

class RespConnection : public std::enable_shared_from_this<RespConnection> {
public:
  RespConnection(tcp::socket socket, std::shared_ptr<RespServer::State> state)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), state_(std::move(state)),
        parser_(state_->parse_limits), session_(state_->commands.open()) {
    boost::system::error_code ec;
    const auto endpoint = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : endpoint.address().to_string();
  }

  ~RespConnection() { state_->leave(this, peer_); }

  void start() {
    if (!state_->enter(this, weak_from_this(), peer_)) {
      state_->refused.inc();
      spdlog::warn("RESP: refused a connection from {}: connection cap reached", peer_);
      boost::system::error_code ec;
      socket_.close(ec);
      return;
    }
    state_->accepted.inc();
    tcp::no_delay nodelay(true);
    boost::system::error_code ec;
    socket_.set_option(nodelay, ec);
    asio::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->run(); });
  }

  // From any thread: close on the connection's strand.
  void close() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->shut(); });
  }

private:
  // Runs the complete commands buffered, then writes or reads.
  void run() {
    while (!closing_ && out_.size() < RespServer::kMaxPendingReply && in_.size() >= wanted_) {
      std::size_t consumed = 0;
      const std::string_view pending = std::string_view(in_).substr(start_);
      const auto status = parser_.parse(pending, args_, consumed);
      if (status == RespParser::Status::kNeedMore) {
        wanted_ = start_ + std::max<std::uint64_t>(parser_.declared_bytes(), pending.size() + 1);
        break;
      }
      if (status == RespParser::Status::kError) {
        spdlog::info("RESP: closing a connection from {}: {}", peer_, parser_.error());
        state_->commands.protocol_error(parser_.error(), out_.text());
        closing_ = true;
        break;
      }
      start_ += consumed;
      wanted_ = 0;
      commanded_ = true;
      state_->commands.execute(args_, session_, out_);
      closing_ = session_.quit;
    }
    if (start_ == in_.size()) {
      in_.clear();
      wanted_ = 0;
      start_ = 0;
    }
    if (!out_.empty()) {
      write();
    } else if (closing_) {
      shut();
    } else {
      read();
    }
  }

  void arm(std::chrono::seconds timeout) {
    timer_.expires_after(timeout);
    timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      if (auto self = weak.lock(); self && !ec) {
        self->state_->timeouts.inc();
        self->shut();
      }
    });
  }

  void read() {
    if (start_ > 0) { // the consumed front goes before the buffer grows
      in_.erase(0, start_);
      wanted_ -= std::min<std::size_t>(wanted_, start_);
      start_ = 0;
    }
    arm(commanded_ ? state_->limits.idle_timeout : state_->limits.header_timeout);
    const std::size_t old = in_.size();
    in_.resize(old + kReadBytes);
    socket_.async_read_some(
        asio::buffer(in_.data() + old, kReadBytes),
        [self = shared_from_this(), old](const boost::system::error_code& ec, std::size_t n) {
          self->in_.resize(old + n);
          if (ec) {
            self->shut();
            return;
          }
          self->run();
        });
  }

  // The replies of every command run so far, in one gathered write: the
  // answers to pipelined commands leave together, values straight from the
  // store's buffers.
  void write() {
    arm(state_->limits.stall_timeout);
    sending_.swap(out_);
    out_.clear();
    sending_.buffers(iov_);
    asio::async_write(
        socket_, iov_, whole_writes,
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t /*n*/) {
          self->iov_.clear();
          self->sending_.clear(); // a large GET's value goes
          if (ec) {
            self->shut();
            return;
          }
          self->run();
        });
  }

  void shut() {
    if (shut_) {
      return;
    }
    shut_ = true;
    closing_ = true;
    timer_.cancel();
    boost::system::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  std::shared_ptr<RespServer::State> state_;
  RespParser parser_;
  RespSession session_;
  std::string peer_;
  std::string in_;
  std::size_t start_ = 0;               // in_'s bytes before this are consumed
  std::size_t wanted_ = 0;              // parse again once in_ holds this many bytes
  RespOut out_;                         // replies not yet being written
  RespOut sending_;                     // the replies being written
  std::vector<asio::const_buffer> iov_; // sending_'s pieces
  std::vector<std::string> args_;
  bool commanded_ = false; // a command was read: idle_timeout, not header_timeout
  bool closing_ = false;
  bool shut_ = false;
};

namespace {

void accept(const std::shared_ptr<RespServer::State>& state) {
  // Accepted on io, then moved to a context of its own (io_pool.h); or, with
  // none, on a strand of io.
  const asio::any_io_executor executor = state->contexts
                                             ? asio::any_io_executor(state->io.get_executor())
                                             : asio::any_io_executor(asio::make_strand(state->io));
  state->acceptor->async_accept(
      executor, [state](boost::system::error_code ec, tcp::socket accepted) {
        if (ec == asio::error::operation_aborted || !state->acceptor->is_open()) {
          return;
        }
        if (!ec) {
          tcp::socket s = state->contexts ? move_to(std::move(accepted), state->contexts(), ec)
                                          : std::move(accepted);
          if (!ec) {
            std::make_shared<RespConnection>(std::move(s), state)->start();
          }
        }
        accept(state);
      });
}

} // namespace

RespServer::RespServer(asio::io_context& io, RespCommands& commands, const Limits& limits,
                       MetricsRegistry& metrics)
    : state_(std::make_shared<State>(io, commands, limits, metrics)) {}

RespServer::~RespServer() {
  stop();
}

tl::expected<void, std::string> RespServer::listen(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return tl::unexpected("resp listen address must be host:port, got '" + address + "'");
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) {
    return tl::unexpected("resp listen address: '" + host + "' is not an IP address");
  }
  unsigned port = 0;
  try {
    port = static_cast<unsigned>(std::stoul(address.substr(colon + 1)));
  } catch (const std::exception&) {
    return tl::unexpected("resp listen address: bad port in '" + address + "'");
  }
  if (port > 65535) {
    return tl::unexpected("resp listen address: bad port in '" + address + "'");
  }
  tcp::acceptor acceptor(state_->io);
  const tcp::endpoint endpoint(ip, static_cast<std::uint16_t>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return tl::unexpected("resp listen on " + address + ": " + ec.message());
  }
  state_->acceptor.emplace(std::move(acceptor));
  accept(state_);
  return {};
}

void RespServer::set_connection_contexts(std::function<asio::io_context&()> next) {
  state_->contexts = std::move(next);
}

std::uint16_t RespServer::port() const {
  boost::system::error_code ec;
  return state_->acceptor ? state_->acceptor->local_endpoint(ec).port() : 0;
}

void RespServer::stop() {
  std::vector<std::shared_ptr<RespConnection>> open;
  {
    std::lock_guard lock(state_->mu);
    if (state_->stopped) {
      return;
    }
    state_->stopped = true;
    for (auto& [raw, weak] : state_->connections) {
      if (auto c = weak.lock()) {
        open.push_back(std::move(c));
      }
    }
  }
  if (state_->acceptor) {
    asio::post(state_->io, [state = state_] {
      boost::system::error_code ec;
      state->acceptor->close(ec);
    });
  }
  for (const auto& c : open) {
    c->close();
  }
}

} // namespace kcache::service
