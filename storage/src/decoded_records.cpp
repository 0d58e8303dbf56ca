#include <kcache/storage/decoded_records.h>

namespace kcache::storage {
namespace {

// A decoded record holds about twice its text (strings, maps, the manifest).
std::size_t charge(std::string_view text) {
  return 3 * text.size() + 256;
}

} // namespace

Result<ActionRecord> DecodedRecords::decode(std::string_view text) {
  std::shared_ptr<const ActionRecord> hit;
  {
    std::lock_guard lock(mu_);
    if (const auto it = by_text_.find(text); it != by_text_.end()) {
      hit = it->second;
    }
  }
  if (hit) {
    return *hit; // copied outside the lock: readers do not queue on it
  }
  auto record = record_from_json(text);
  if (!record || charge(text) > capacity_ / 16) {
    return record; // failures are not kept; nor is a record that would crowd out many
  }
  auto decoded = std::make_shared<const ActionRecord>(*record);
  std::lock_guard lock(mu_);
  if (bytes_ + charge(text) > capacity_) {
    // Starting over is O(1) per insert, amortized; hot records come back on their next read.
    by_text_.clear();
    bytes_ = 0;
  }
  if (by_text_.try_emplace(std::string(text), std::move(decoded)).second) {
    bytes_ += charge(text);
  }
  return record;
}

std::size_t DecodedRecords::entries() const {
  std::lock_guard lock(mu_);
  return by_text_.size();
}

} // namespace kcache::storage
