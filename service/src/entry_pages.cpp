#include "entry_pages.h"

#include <algorithm>
#include <tuple>

namespace kcache::service {

using storage::ListCursor;
using storage::ObjectInfo;

namespace {

// Entries read per Store::list call while walking a whole listing.
constexpr std::size_t kChunk = 4096;

ListCursor cursor_of(const ObjectInfo& info) {
  return {info.area, info.key};
}

} // namespace

storage::Result<KeyPage> key_page(storage::Store& store, storage::ListOptions options,
                                  std::size_t limit, const EntryFilter& keep,
                                  std::size_t max_examined) {
  limit = std::max<std::size_t>(limit, 1);
  // A row past the page says more follow; filters may drop rows, so a chunk
  // is never tiny.
  options.limit = std::clamp<std::size_t>(limit + 1, 128, kChunk);
  KeyPage page;
  for (;;) {
    auto listed = store.list(options);
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    for (ObjectInfo& info : *listed) {
      ++page.examined;
      if (keep(info)) {
        if (page.rows.size() == limit) {
          page.next = cursor_of(page.rows.back()); // a row beyond the page: more follow
          return page;
        }
        page.rows.push_back(info);
      }
      if (page.examined >= max_examined) {
        page.next = cursor_of(info); // stopped here: the next page looks on from it
        return page;
      }
    }
    if (listed->size() < options.limit) {
      return page; // the end
    }
    options.after = cursor_of(listed->back());
  }
}

std::optional<EntrySort> parse_entry_sort(std::string_view name) {
  if (name == "last_access") {
    return EntrySort::kLastAccess;
  }
  if (name == "size") {
    return EntrySort::kSize;
  }
  if (name == "hits") {
    return EntrySort::kHits;
  }
  if (name == "created") {
    return EntrySort::kCreated;
  }
  if (name == "key") {
    return EntrySort::kKey;
  }
  return std::nullopt;
}

storage::Result<SortedPage> sorted_page(storage::Store& store, storage::ListOptions options,
                                        EntrySort sort, std::size_t offset, std::size_t limit,
                                        const EntryFilter& keep) {
  // a before b in the listing; ties by area and key, so pages of one
  // listing never overlap.
  const auto before = [sort](const ObjectInfo& a, const ObjectInfo& b) {
    const auto tie = std::tie(a.area, a.key) < std::tie(b.area, b.key);
    switch (sort) {
    case EntrySort::kSize:
      return a.size != b.size ? a.size > b.size : tie;
    case EntrySort::kHits:
      return a.hits != b.hits ? a.hits > b.hits : tie;
    case EntrySort::kCreated:
      return a.created_ms != b.created_ms ? a.created_ms > b.created_ms : tie;
    case EntrySort::kLastAccess:
      return a.last_access_ms != b.last_access_ms ? a.last_access_ms > b.last_access_ms : tie;
    case EntrySort::kKey:
      break;
    }
    return tie;
  };
  const std::size_t kept_most = offset + limit;
  // A max-heap by `before`: its front is the last of the entries kept.
  std::vector<ObjectInfo> kept;
  SortedPage page;
  options.limit = kChunk;
  options.after.reset();
  for (;;) {
    auto listed = store.list(options);
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    const bool more = listed->size() == options.limit;
    if (more) {
      options.after = cursor_of(listed->back());
    }
    for (ObjectInfo& info : *listed) {
      if (!keep(info)) {
        continue;
      }
      ++page.total;
      if (kept.size() < kept_most) {
        kept.push_back(std::move(info));
        std::push_heap(kept.begin(), kept.end(), before);
      } else if (kept_most > 0 && before(info, kept.front())) {
        std::pop_heap(kept.begin(), kept.end(), before);
        kept.back() = std::move(info);
        std::push_heap(kept.begin(), kept.end(), before);
      }
    }
    if (!more) {
      break;
    }
  }
  std::sort_heap(kept.begin(), kept.end(), before);
  if (offset < kept.size()) {
    page.rows.assign(std::make_move_iterator(kept.begin() + static_cast<std::ptrdiff_t>(offset)),
                     std::make_move_iterator(kept.end()));
  }
  return page;
}

} // namespace kcache::service
