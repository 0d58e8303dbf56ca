// libFuzzer target: arbitrary bytes through Beast's request parser (with the
// daemon's limits) and, when they parse, through the request handler over a
// memory store. Anything but a clean response is a bug.

#include <kcache/service/request_handler.h>
#include <kcache/storage/memory_store.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>

namespace {

struct Fixture {
  kcache::storage::MemoryStore store{16 << 20};
  kcache::service::MetricsRegistry metrics;
  kcache::service::RequestHandler handler{store, {{"memory", &store}}, metrics, {}};
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fixture; // one store across inputs: state-dependent paths get exercised too
  namespace http = boost::beast::http;
  http::request_parser<kcache::service::PieceBody> parser;
  parser.header_limit(16 << 10);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done()) {
    parser.put_eof(ec);
  }
  if (ec || !parser.is_done()) {
    return 0;
  }
  const auto response = fixture.handler.handle(parser.get());
  if (response.result_int() < 200 || response.result_int() > 599) {
    __builtin_trap();
  }
  return 0;
}
