#include <kcache/service/job_worker_pool.h>

namespace kcache::service {

JobWorkerPool::JobWorkerPool(unsigned workers, Take take, Run run)
    : take_(std::move(take)), run_(std::move(run)), size_(workers) {
  for (unsigned i = 0; i < workers; ++i) {
    threads_.emplace_back([this](const std::stop_token& stop) { loop(stop); });
  }
}

void JobWorkerPool::notify() {
  {
    std::lock_guard lock(mu_);
    ++generation_;
  }
  cv_.notify_all();
}

void JobWorkerPool::stop() {
  for (std::jthread& t : threads_) {
    t.request_stop(); // wakes cv_ waits through their stop token
  }
  for (std::jthread& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
}

void JobWorkerPool::loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    std::uint64_t seen = 0;
    {
      std::lock_guard lock(mu_);
      seen = generation_;
    }
    if (std::optional<std::string> id = take_()) {
      run_(*id);
      continue;
    }
    std::unique_lock lock(mu_);
    cv_.wait(lock, stop, [&] { return generation_ != seen; });
  }
}

} // namespace kcache::service
