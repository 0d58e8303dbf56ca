#include <kcache/service/sorted_windows.h>

#include <algorithm>

namespace kcache::service {

std::shared_ptr<const SortedWindows::Window> SortedWindows::find(const std::string& listing) const {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  const auto it =
      std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.listing == listing; });
  if (it == kept_.end() || now - it->at > kFreshFor) {
    return nullptr;
  }
  return it->window;
}

void SortedWindows::keep(const std::string& listing, std::shared_ptr<const Window> window) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  kept_.remove_if([&](const Kept& k) { return k.listing == listing || now - k.at > kFreshFor; });
  kept_.push_front({listing, std::move(window), now});
  if (kept_.size() > kMaxWindows) {
    kept_.pop_back();
  }
}

} // namespace kcache::service
