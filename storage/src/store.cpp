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

namespace {

SharedGetResult shared(GetResult got) {
  if (!got) {
    return tl::unexpected(std::move(got.error()));
  }
  if (!got->has_value()) {
    return std::optional<SharedBytes>{};
  }
  return std::optional<SharedBytes>{SharedBytes(std::move(**got))};
}

} // namespace

SharedGetResult Store::get_shared(Area area, std::string_view key) {
  return shared(get(area, key));
}

std::vector<SharedGetResult> Store::get_many_shared(Area area, std::span<const std::string> keys) {
  std::vector<GetResult> got = get_many(area, keys);
  std::vector<SharedGetResult> out;
  out.reserve(got.size());
  for (GetResult& one : got) {
    out.push_back(shared(std::move(one)));
  }
  return out;
}

} // namespace kcache::storage
