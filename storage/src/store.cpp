#include <kcache/storage/store.h>

#include <algorithm>
#include <chrono>
#include <tuple>

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
  case StoreError::Code::kUnsupported:
    return "unsupported";
  }
  return "unknown";
}

std::uint64_t order_value(const ObjectInfo& info, ListOrder order) {
  switch (order) {
  case ListOrder::kSize:
    return info.size;
  case ListOrder::kCreated:
    return static_cast<std::uint64_t>(std::max<std::int64_t>(info.created_ms, 0));
  case ListOrder::kLastAccess:
    return static_cast<std::uint64_t>(std::max<std::int64_t>(info.last_access_ms, 0));
  case ListOrder::kHits:
    return info.hits;
  }
  return 0;
}

bool comes_before(const ObjectInfo& a, const ObjectInfo& b, ListOrder order) {
  const std::uint64_t va = order_value(a, order);
  const std::uint64_t vb = order_value(b, order);
  if (va != vb) {
    return va > vb;
  }
  return std::tie(a.area, a.key) < std::tie(b.area, b.key);
}

Result<std::vector<std::optional<ObjectInfo>>>
Store::describe(std::span<const ListCursor> entries) {
  std::vector<std::optional<ObjectInfo>> out;
  out.reserve(entries.size());
  for (const ListCursor& entry : entries) {
    ListOptions one;
    one.area = entry.area;
    one.prefix = entry.key;
    one.limit = 1; // key order: the key itself comes first of those it prefixes
    auto listed = list(one);
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    if (!listed->empty() && listed->front().key == entry.key) {
      out.emplace_back(std::move(listed->front()));
    } else {
      out.emplace_back();
    }
  }
  return out;
}

Result<TopList> Store::list_top(const TopListOptions& /*options*/) {
  return tl::unexpected(
      StoreError{StoreError::Code::kUnsupported, name() + " keeps no ordered index"});
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
