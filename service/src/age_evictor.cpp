#include <kcache/service/age_evictor.h>
#include <kcache/storage/maintenance.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::service {

AgeEvictor::AgeEvictor(storage::Store& store, std::chrono::seconds older_than)
    : store_(store), older_than_(older_than),
      thread_([this](const std::stop_token& stop) { loop(stop); }) {}

AgeEvictor::~AgeEvictor() {
  thread_.request_stop();
}

std::chrono::milliseconds AgeEvictor::interval(std::chrono::seconds older_than) {
  return std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(older_than) / 10,
                    std::chrono::milliseconds(std::chrono::seconds(1)),
                    std::chrono::milliseconds(std::chrono::hours(1)));
}

void AgeEvictor::loop(const std::stop_token& stop) {
  const auto every = interval(older_than_);
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, stop, every, [] { return false; }) || stop.stop_requested()) {
        return;
      }
    }
    auto report = storage::collect_older_than(store_, {.older_than = older_than_});
    if (!report) {
      spdlog::warn("evict_older_than: the walk stopped: {}", report.error().message);
    } else if (report->removed_entries > 0) {
      spdlog::info("evict_older_than: removed {} entries ({} bytes) not read for {} s",
                   report->removed_entries, report->removed_bytes, older_than_.count());
    }
  }
}

} // namespace kcache::service
