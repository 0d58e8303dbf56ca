#include <kcache/storage/store.h>

#include <chrono>

namespace kcache::storage {

std::string_view area_name(Area area) {
  return area == Area::kAction ? "ac" : "cas";
}

std::string_view error_code_name(StoreError::Code code) {
  switch (code) {
  case StoreError::Code::kUnavailable:
    return "unavailable";
  case StoreError::Code::kTimeout:
    return "timeout";
  case StoreError::Code::kIo:
    return "io";
  case StoreError::Code::kCorrupt:
    return "corrupt";
  case StoreError::Code::kInvalidArgument:
    return "invalid-argument";
  case StoreError::Code::kTooLarge:
    return "too-large";
  case StoreError::Code::kNoSpace:
    return "no-space";
  }
  return "unknown";
}

std::vector<GetResult> Store::get_many(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    out.push_back(get(area, key));
  }
  return out;
}

} // namespace kcache::storage
