#pragma once
// The body of kcached's responses: a string, as Beast's string_body, or a
// source that yields the body piece by piece while the socket drains (large
// artifacts, read from the store a chunk at a time). The value is a
// std::string either way, so handlers and tests build and read bodies as
// strings; a streamed body's string stays empty and its source says its size.
//
// A source's error mid-body fails the write: the connection is closed short of
// the Content-Length, which every HTTP client reports as an error, so a
// failure after the 200 went out is never a silently truncated answer.

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <boost/system/error_code.hpp>
#include <tl/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace kcache::service {

class BodySource {
public:
  virtual ~BodySource() = default;
  BodySource() = default;
  BodySource(const BodySource&) = delete;
  BodySource& operator=(const BodySource&) = delete;

  // The whole body's size (the Content-Length), known up front.
  virtual std::uint64_t size() const = 0;
  // The most memory the source holds at once (counted against send_memory).
  virtual std::uint64_t window() const = 0;
  // The next piece, valid until the next call; empty once the body is done.
  // An error ends the response (logged by the source).
  virtual tl::expected<std::string_view, std::string> next() = 0;
};

// Beast's Body concept names the members below (value_type, reader, writer).
struct PieceBody {
  class value_type : public std::string { // NOLINT(readability-identifier-naming)
  public:
    using std::string::string;
    using std::string::operator=;
    value_type() = default;
    value_type(std::string text) : std::string(std::move(text)) {} // NOLINT: a string is a body
    // Set: the body comes from here and the string is empty.
    std::shared_ptr<BodySource> source;
  };

  static std::uint64_t size(const value_type& body) {
    return body.source ? body.source->size() : body.size();
  }

  // Requests and client-side reads: as string_body's reader.
  class reader { // NOLINT(readability-identifier-naming)
  public:
    template <bool kIsRequest, class Fields>
    explicit reader(boost::beast::http::header<kIsRequest, Fields>& /*head*/, value_type& body)
        : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::system::error_code& ec) {
      if (length) {
        if (*length > body_.max_size()) {
          ec = boost::beast::http::error::buffer_overflow;
          return;
        }
        body_.reserve(static_cast<std::size_t>(*length));
      }
      ec = {};
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
      const std::size_t extra = boost::asio::buffer_size(buffers);
      const std::size_t at = body_.size();
      body_.resize(at + extra);
      ec = {};
      return boost::asio::buffer_copy(boost::asio::buffer(&body_[at], extra), buffers);
    }

    void finish(boost::system::error_code& ec) { ec = {}; }

  private:
    value_type& body_;
  };

  class writer { // NOLINT(readability-identifier-naming)
  public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool kIsRequest, class Fields>
    explicit writer(const boost::beast::http::header<kIsRequest, Fields>& /*head*/,
                    const value_type& body)
        : body_(body) {}

    void init(boost::system::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::system::error_code& ec) {
      ec = {};
      if (!body_.source) {
        return {{const_buffers_type{body_.data(), body_.size()}, false}};
      }
      auto piece = body_.source->next();
      if (!piece) {
        ec = boost::system::errc::make_error_code(boost::system::errc::io_error);
        return boost::none;
      }
      if (piece->empty()) {
        return boost::none;
      }
      return {{const_buffers_type{piece->data(), piece->size()}, true}};
    }

  private:
    const value_type& body_;
  };
};

} // namespace kcache::service
