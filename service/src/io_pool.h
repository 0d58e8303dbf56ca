#pragma once
// kcached's I/O threads (issue 21): one io_context per thread, so a
// connection lives on one thread. A connection is handed to a context at
// accept (round-robin over all of them) and every handler of it runs on that
// context's one thread, in order: no strand, no hand-off between cores, its
// buffers stay in that core's cache. Context 0 is the service's own (signals,
// acceptors, timers); it serves connections too.
//
// What a request touches beyond its connection (the store, the handler's
// tables, the servers' shared state) was already shared between threads when
// one io_context ran on several; it is unchanged here. A handler that blocks
// (a slow tier's synchronous read, under its own deadline) now holds up the
// other connections of its thread, where before another thread could take
// them.

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace kcache::service {

class IoPool {
public:
  // `threads` contexts in all (at least 1), `main` the first.
  IoPool(boost::asio::io_context& main, unsigned threads);
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // The context for the next connection; from any thread.
  boost::asio::io_context& next();
  std::size_t size() const { return others_.size() + 1; }
  // Runs every context, each on its own thread (main on the caller's), until
  // stop(); then joins them.
  void run();
  // From any thread: every context stops, run() returns.
  void stop();

private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;

  boost::asio::io_context& main_;
  std::vector<std::unique_ptr<boost::asio::io_context>> others_;
  std::vector<Guard> guards_; // keep the others running while they have nothing to do
  std::atomic<std::size_t> next_{0};
};

// A socket accepted on the acceptor's context, moved onto `context` (its
// descriptor handed over): the accept itself stays on the acceptor's context
// and no operation there holds an object of another context, so the contexts
// can be torn down one after the other. On failure `ec` is set and the
// descriptor closed.
template <typename Socket>
Socket move_to(Socket accepted, boost::asio::io_context& context, boost::system::error_code& ec) {
  Socket out(context);
  const auto protocol = accepted.local_endpoint(ec).protocol();
  if (ec) {
    return out;
  }
  const auto fd = accepted.release(ec);
  if (ec) {
    return out;
  }
  out.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
  }
  return out;
}

} // namespace kcache::service
