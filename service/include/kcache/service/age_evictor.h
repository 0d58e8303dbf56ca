#pragma once
// kcached's evict_older_than: a thread that removes the entries nobody read
// for that long (storage::collect_older_than), as ccache's --evict-older-than
// does, every tenth of the age (at least a second, at most an hour). The size
// bound needs no such thread: the tiers evict by size on write.

#include <kcache/storage/store.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace kcache::service {

class AgeEvictor {
public:
  AgeEvictor(storage::Store& store, std::chrono::seconds older_than);
  ~AgeEvictor(); // stops the thread, waiting for a walk under way
  AgeEvictor(const AgeEvictor&) = delete;
  AgeEvictor& operator=(const AgeEvictor&) = delete;

  static std::chrono::milliseconds interval(std::chrono::seconds older_than);

private:
  void loop(const std::stop_token& stop);

  storage::Store& store_;
  const std::chrono::seconds older_than_;
  std::mutex mu_;
  std::condition_variable_any wake_;
  std::jthread thread_; // last: stops before the members it uses go
};

} // namespace kcache::service
