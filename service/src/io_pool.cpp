#include "io_pool.h"

#include <thread>

namespace kcache::service {

IoPool::IoPool(boost::asio::io_context& main, unsigned threads) : main_(main) {
  for (unsigned i = 1; i < threads; ++i) {
    // One thread runs each: the hint lets asio skip waking other threads.
    others_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.emplace_back(others_.back()->get_executor());
  }
}

boost::asio::io_context& IoPool::next() {
  const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed) % size();
  return i == 0 ? main_ : *others_[i - 1];
}

void IoPool::run() {
  std::vector<std::thread> threads;
  threads.reserve(others_.size());
  for (const auto& io : others_) {
    threads.emplace_back([&context = *io] { context.run(); });
  }
  main_.run();
  for (std::thread& t : threads) {
    t.join();
  }
}

void IoPool::stop() {
  for (Guard& guard : guards_) {
    guard.reset();
  }
  for (const auto& io : others_) {
    io->stop();
  }
  main_.stop();
}

} // namespace kcache::service
