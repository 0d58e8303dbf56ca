#pragma once
// The threads that run jobs. Each takes the next job id from its owner
// (`take`, which locks what it needs) and runs it (`run`); when there is none
// it sleeps until notify(). It knows nothing of queues or jobs: the owner
// decides what runs next and what running means.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace kcache::service {

class JobWorkerPool {
public:
  using Take = std::function<std::optional<std::string>()>;
  using Run = std::function<void(const std::string& id)>;

  JobWorkerPool(unsigned workers, Take take, Run run);
  ~JobWorkerPool() { stop(); }
  JobWorkerPool(const JobWorkerPool&) = delete;
  JobWorkerPool& operator=(const JobWorkerPool&) = delete;

  // Work may be waiting: wakes the idle threads to look.
  void notify();
  // Wakes every thread and joins them; a thread in `run` finishes it first.
  void stop();
  std::size_t size() const { return size_; }

private:
  void loop(const std::stop_token& stop);

  const Take take_;
  const Run run_;
  const std::size_t size_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  // Bumped per notify(): a thread that found nothing sleeps only while it
  // stays the same, so a notify between its look and its sleep is not lost.
  std::uint64_t generation_ = 0;
  std::vector<std::jthread> threads_; // last: joined before the rest goes
};

} // namespace kcache::service
