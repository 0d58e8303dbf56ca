#pragma once
// TLS over an Asio stream (beast::basic_stream), for kcached's listener and
// libkcache's https://. Header-only: both ends instantiate it over their own
// socket types; each links OpenSSL::SSL and Boost itself.
//
// Why not asio::ssl::stream: it moves ciphertext through a 17 KiB BIO pair and
// 17 KiB buffers, so every TLS record (<= 16 KiB) costs a socket send or
// receive and an async operation of its own (a 64 KiB answer: 5 sends on the
// server, 5 receives with a timer re-armed for each on the client; TLS
// throughput was 0.37x plain at 64 KiB x 16). Here OpenSSL writes to and reads
// from buffers the stream owns, through a BIO of our own: a write encrypts a
// whole buffer sequence (up to kMaxWriteBytes) and hands the socket one
// write; a read takes what the socket has (up to the read buffer) and
// decrypts as many records as the caller's buffers hold.

#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/write.hpp>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

namespace kcache::protocol {

namespace tls_detail {

// Ciphertext between OpenSSL and the socket.
struct Wire {
  std::vector<unsigned char> in; // from the socket; [in_begin, in_end) not yet read by OpenSSL
  std::size_t in_begin = 0;
  std::size_t in_end = 0;
  bool in_eof = false;
  std::vector<unsigned char> out; // encrypted, not yet sent
};

inline int wire_write(BIO* bio, const char* data, int size) {
  auto* wire = static_cast<Wire*>(BIO_get_data(bio));
  // As unsigned chars, so the insert is one memmove: from chars it converted
  // byte by byte (5% of kcached's CPU at 64 KiB x 16 over TLS).
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  wire->out.insert(wire->out.end(), bytes, bytes + size);
  return size;
}

inline int wire_read(BIO* bio, char* data, int size) {
  auto* wire = static_cast<Wire*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const std::size_t available = wire->in_end - wire->in_begin;
  if (available == 0) {
    if (wire->in_eof) {
      return 0;
    }
    BIO_set_retry_read(bio);
    return -1;
  }
  const std::size_t n = std::min(available, static_cast<std::size_t>(size));
  std::memcpy(data, wire->in.data() + wire->in_begin, n);
  wire->in_begin += n;
  return static_cast<int>(n);
}

inline long wire_ctrl(BIO* /*bio*/, int cmd, long /*num*/, void* /*ptr*/) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0; // nothing is buffered inside the BIO
}

inline int wire_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// The method table: made once, on first use, and never changed after.
inline const BIO_METHOD* wire_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kcache-tls-wire");
    if (m != nullptr) {
      BIO_meth_set_write(m, wire_write);
      BIO_meth_set_read(m, wire_read);
      BIO_meth_set_ctrl(m, wire_ctrl);
      BIO_meth_set_create(m, wire_create);
    }
    return m;
  }();
  return method;
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

} // namespace tls_detail

template <typename NextLayer> class TlsStream {
public:
  using next_layer_type = NextLayer;
  using executor_type = typename NextLayer::executor_type;
  using error_code = boost::system::error_code;

  // Plaintext encrypted per write: bounds the ciphertext held per connection.
  static constexpr std::size_t kMaxWriteBytes = 256 << 10;

  // `read_buffer_bytes`: the most ciphertext taken from the socket at once.
  template <typename Arg>
  TlsStream(Arg&& arg, boost::asio::ssl::context& context, std::size_t read_buffer_bytes = 64 << 10)
      : next_(std::forward<Arg>(arg)), wire_(std::make_unique<tls_detail::Wire>()),
        ssl_(SSL_new(context.native_handle())), read_buffer_bytes_(read_buffer_bytes) {
    const BIO_METHOD* method = tls_detail::wire_method();
    BIO* bio = method != nullptr && ssl_ ? BIO_new(method) : nullptr;
    if (bio == nullptr) {
      ::ERR_clear_error();
      throw std::bad_alloc(); // OpenSSL allocates these; nothing else fails here
    }
    BIO_set_data(bio, wire_.get());
    SSL_set_bio(ssl_.get(), bio, bio); // one reference, owned by the SSL
  }
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  ~TlsStream() = default;

  executor_type get_executor() { return next_.get_executor(); }
  NextLayer& next_layer() { return next_; }
  SSL* native_handle() { return ssl_.get(); }

  template <typename Token>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type type, Token&& token) {
    if (type == boost::asio::ssl::stream_base::client) {
      SSL_set_connect_state(ssl_.get());
    } else {
      SSL_set_accept_state(ssl_.get());
    }
    return boost::asio::async_compose<Token, void(error_code)>(HandshakeOp{*this}, token, next_);
  }

  template <typename Buffers, typename Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(error_code, std::size_t)>(
        ReadOp<Buffers>{*this, buffers}, token, next_);
  }

  template <typename Buffers, typename Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(error_code, std::size_t)>(
        WriteOp<Buffers>{*this, buffers}, token, next_);
  }

  // Best effort, without waiting: queues a close_notify and tries one
  // non-blocking send of it on `socket` (the lowest layer) before the caller
  // closes. Skipped while a write is in flight, before the handshake finished
  // and after a fatal error (OpenSSL forbids SSL_shutdown then).
  template <typename Socket> void send_close_notify(Socket& socket) {
    if (writing_ || fatal_ || SSL_is_init_finished(ssl_.get()) != 1 ||
        (SSL_get_shutdown(ssl_.get()) & SSL_SENT_SHUTDOWN) != 0) {
      return;
    }
    ::ERR_clear_error();
    (void)SSL_shutdown(ssl_.get()); // 0: ours is sent, the peer's not awaited
    ::ERR_clear_error();
    error_code ec;
    socket.non_blocking(true, ec);
    if (!ec && !wire_->out.empty()) {
      (void)socket.write_some(boost::asio::buffer(wire_->out), ec);
    }
    wire_->out.clear();
  }

private:
  enum class Status { kDone, kWantRead, kError };

  // Maps a failed SSL call to an error; kWantRead when it needs more ciphertext.
  Status failure(int ret, error_code& ec) {
    switch (SSL_get_error(ssl_.get(), ret)) {
    case SSL_ERROR_WANT_READ:
      if (!wire_->in_eof) {
        return Status::kWantRead;
      }
      fatal_ = true;
      ec = boost::asio::ssl::error::stream_truncated;
      break;
    case SSL_ERROR_ZERO_RETURN: // the peer's close_notify
      ec = boost::asio::error::eof;
      break;
    default:
      fatal_ = true;
      if (const unsigned long code = ::ERR_get_error(); code != 0 && !wire_->in_eof) {
        ec = error_code(static_cast<int>(code), boost::asio::error::get_ssl_category());
      } else {
        ec = wire_->in_eof ? error_code(boost::asio::ssl::error::stream_truncated)
                           : error_code(boost::asio::error::connection_reset);
      }
      break;
    }
    ::ERR_clear_error();
    return Status::kError;
  }

  // Decrypts into `buffers` what the ciphertext held allows.
  template <typename Buffers>
  Status decrypt(const Buffers& buffers, std::size_t& n, error_code& ec) {
    n = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      const boost::asio::mutable_buffer b = *it;
      std::size_t filled = 0;
      while (filled < b.size()) {
        ::ERR_clear_error();
        std::size_t got = 0;
        const int ret =
            SSL_read_ex(ssl_.get(), static_cast<char*>(b.data()) + filled, b.size() - filled, &got);
        if (ret != 1) {
          error_code failed;
          const Status status = failure(ret, failed);
          if (n > 0 || filled > 0) {
            n += filled;
            return Status::kDone; // the error, if any, comes again on the next read
          }
          ec = failed;
          return status;
        }
        filled += got;
      }
      n += filled;
    }
    return Status::kDone;
  }

  // Encrypts up to kMaxWriteBytes of `buffers` into wire_->out. Small pieces
  // (an HTTP head, small parts) are staged so they share records; a piece of
  // a whole record or more goes from where it is, after what is staged has
  // gone as its own record (topping that up from the piece copied 16 KiB of
  // a 64 KiB answer's body: 2.6% of kcached's CPU at 64 KiB x 16, for the
  // same number of records).
  template <typename Buffers> std::size_t encrypt(const Buffers& buffers, error_code& ec) {
    constexpr std::size_t kRecord = 16 << 10;
    std::size_t total = 0;
    const std::size_t want = std::min(boost::asio::buffer_size(buffers), kMaxWriteBytes);
    wire_->out.reserve(wire_->out.size() + want + (want / kRecord + 2) * 32); // + record overhead
    auto put = [&](const void* data, std::size_t size) {
      ::ERR_clear_error();
      std::size_t written = 0;
      if (SSL_write_ex(ssl_.get(), data, size, &written) != 1) {
        (void)failure(0, ec);
        return false;
      }
      return true;
    };
    staging_.clear();
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && total < kMaxWriteBytes; ++it) {
      const boost::asio::const_buffer b = *it;
      const auto* p = static_cast<const unsigned char*>(b.data());
      std::size_t size = std::min(b.size(), kMaxWriteBytes - total);
      total += size;
      if (!staging_.empty() && size >= kRecord) {
        if (!put(staging_.data(), staging_.size())) {
          return 0;
        }
        staging_.clear();
      }
      if (!staging_.empty() || size < kRecord) {
        const std::size_t k = std::min(size, kRecord - staging_.size());
        staging_.insert(staging_.end(), p, p + k);
        p += k;
        size -= k;
        if (staging_.size() == kRecord) {
          if (!put(staging_.data(), staging_.size())) {
            return 0;
          }
          staging_.clear();
        }
      }
      if (size >= kRecord) {
        if (!put(p, size)) {
          return 0;
        }
      } else if (size > 0) {
        staging_.assign(p, p + size);
      }
    }
    if (!staging_.empty() && !put(staging_.data(), staging_.size())) {
      return 0;
    }
    return total;
  }

  // Room for a socket read at the end of wire_->in (what is unread moves to the front).
  boost::asio::mutable_buffer read_room() {
    tls_detail::Wire& w = *wire_;
    if (w.in.size() != read_buffer_bytes_) {
      w.in.resize(read_buffer_bytes_);
    }
    if (w.in_begin == w.in_end) {
      w.in_begin = w.in_end = 0;
    } else if (w.in_begin > 0) {
      std::memmove(w.in.data(), w.in.data() + w.in_begin, w.in_end - w.in_begin);
      w.in_end -= w.in_begin;
      w.in_begin = 0;
    }
    return boost::asio::buffer(w.in.data() + w.in_end, w.in.size() - w.in_end);
  }

  void took_input(error_code& ec, std::size_t n) {
    if (ec == boost::asio::error::eof) {
      wire_->in_eof = true; // OpenSSL sees the end: truncated unless close_notify came first
      ec = {};
    }
    wire_->in_end += n;
  }

  // Sent ciphertext is dropped; a large buffer is given back rather than held by an idle
  // connection.
  void sent() {
    writing_ = false;
    wire_->out.clear();
    if (wire_->out.capacity() > (128 << 10)) {
      wire_->out.shrink_to_fit();
    }
  }

  // Steps shared by the operations: one socket read, one flush of wire_->out,
  // or completing through a post (never inside the initiating call).
  enum class Step { kStart, kReading, kFlushing, kPosted };

  template <typename Self> void flush(Self& self) {
    writing_ = true;
    // All of it in one socket write where the socket takes it: transfer_all
    // hands the socket at most 64 KiB per call, so a 64 KiB answer (66 KB of
    // records) left in two sends and the peer woke for a 640-byte tail.
    boost::asio::async_write(
        next_, boost::asio::buffer(wire_->out),
        [](const error_code& ec, std::size_t) {
          return ec ? std::size_t{0} : std::numeric_limits<std::size_t>::max();
        },
        std::move(self));
  }

  struct HandshakeOp {
    TlsStream& s;
    Step step = Step::kStart;
    error_code result{};
    bool done = false;

    template <typename Self> void operator()(Self& self, error_code ec = {}, std::size_t n = 0) {
      switch (step) {
      case Step::kPosted:
        return self.complete(result);
      case Step::kReading:
        s.took_input(ec, n);
        if (ec) {
          return self.complete(ec);
        }
        break;
      case Step::kFlushing:
        s.sent();
        if (ec || done || result) {
          return self.complete(result ? result : ec);
        }
        break;
      case Step::kStart:
        break;
      }
      ::ERR_clear_error();
      const int ret = SSL_do_handshake(s.ssl_.get());
      Status status = Status::kDone;
      if (ret != 1) {
        status = s.failure(ret, result);
      }
      done = status == Status::kDone;
      if (!s.wire_->out.empty()) { // our flight, or the alert that says why not
        step = Step::kFlushing;
        return s.flush(self);
      }
      if (status == Status::kWantRead) {
        step = Step::kReading;
        return s.next_.async_read_some(s.read_room(), std::move(self));
      }
      step = Step::kPosted;
      boost::asio::post(std::move(self));
    }
  };

  template <typename Buffers> struct ReadOp {
    TlsStream& s;
    Buffers buffers;
    Step step = Step::kStart;
    error_code result{};
    std::size_t bytes = 0;

    template <typename Self> void operator()(Self& self, error_code ec = {}, std::size_t n = 0) {
      switch (step) {
      case Step::kPosted:
        return self.complete(result, bytes);
      case Step::kReading:
        s.took_input(ec, n);
        if (ec) {
          return self.complete(ec, 0);
        }
        break;
      case Step::kFlushing:
        s.sent();
        if (ec) {
          return self.complete(ec, 0);
        }
        step = Step::kReading;
        return s.next_.async_read_some(s.read_room(), std::move(self));
      case Step::kStart:
        if (boost::asio::buffer_size(buffers) == 0) {
          step = Step::kPosted;
          return boost::asio::post(std::move(self));
        }
        break;
      }
      const bool waited = step != Step::kStart;
      const Status status = s.decrypt(buffers, bytes, result);
      if (status == Status::kWantRead) {
        // Something to answer first (a key update): sent unless a write is under way.
        if (!s.wire_->out.empty() && !s.writing_) {
          step = Step::kFlushing;
          return s.flush(self);
        }
        step = Step::kReading;
        return s.next_.async_read_some(s.read_room(), std::move(self));
      }
      if (waited) {
        return self.complete(result, bytes);
      }
      step = Step::kPosted;
      boost::asio::post(std::move(self));
    }
  };

  template <typename Buffers> struct WriteOp {
    TlsStream& s;
    Buffers buffers;
    Step step = Step::kStart;
    error_code result{};
    std::size_t bytes = 0;

    template <typename Self>
    void operator()(Self& self, error_code ec = {}, std::size_t /*n*/ = 0) {
      switch (step) {
      case Step::kPosted:
        return self.complete(result, bytes);
      case Step::kFlushing:
        s.sent();
        return self.complete(ec, ec ? 0 : bytes);
      case Step::kStart:
      case Step::kReading:
        break;
      }
      if (s.writing_) {
        result = boost::asio::error::in_progress;
      } else {
        bytes = s.encrypt(buffers, result);
      }
      if (!result && !s.wire_->out.empty()) {
        step = Step::kFlushing;
        return s.flush(self);
      }
      if (result) {
        bytes = 0;
      }
      step = Step::kPosted;
      boost::asio::post(std::move(self));
    }
  };

  NextLayer next_;
  std::unique_ptr<tls_detail::Wire> wire_; // the BIO points here: a stable address
  std::unique_ptr<SSL, tls_detail::SslFree> ssl_;
  std::size_t read_buffer_bytes_;
  std::vector<unsigned char> staging_;
  bool writing_ = false;
  bool fatal_ = false;
};

} // namespace kcache::protocol
