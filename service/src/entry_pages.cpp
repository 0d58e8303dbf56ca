#include "entry_pages.h"

#include "listing_reader.h"

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
                                  std::size_t max_examined, const std::string& ns) {
  limit = std::max<std::size_t>(limit, 1);
  // A row past the page says more follow; filters may drop rows, so a chunk
  // is never tiny.
  ListingReader reader(store, std::move(options), std::clamp<std::size_t>(limit + 1, 128, kChunk),
                       ns);
  KeyPage page;
  for (;;) {
    auto listed = reader.next();
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    if (listed->empty()) {
      return page; // the end
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

namespace {

std::optional<storage::ListOrder> order_of(EntrySort sort) {
  switch (sort) {
  case EntrySort::kSize:
    return storage::ListOrder::kSize;
  case EntrySort::kHits:
    return storage::ListOrder::kHits;
  case EntrySort::kCreated:
    return storage::ListOrder::kCreated;
  case EntrySort::kLastAccess:
    return storage::ListOrder::kLastAccess;
  case EntrySort::kKey:
    break;
  }
  return std::nullopt;
}

} // namespace

storage::Result<SortedPage> sorted_page(storage::Store& store, storage::ListOptions options,
                                        const SortedQuery& query, const EntryFilter& keep) {
  const EntrySort sort = query.sort;
  const std::size_t offset = query.offset;
  const std::size_t limit = query.limit;
  if (const auto order = order_of(sort);
      order && query.keep_all && query.ns.empty() && options.prefix.empty()) {
    auto top = store.list_top({*order, offset + std::min(limit, query.indexed_limit),
                               options.servable_only, options.area});
    if (top) {
      SortedPage page;
      page.indexed = true;
      page.total = top->entries;
      page.total_estimated = !top->entries_exact;
      if (offset < top->rows.size()) {
        page.rows.assign(
            std::make_move_iterator(top->rows.begin() + static_cast<std::ptrdiff_t>(offset)),
            std::make_move_iterator(top->rows.end()));
      }
      // A count that lags the rows (a put between them) never says less
      // than the page shows.
      page.total = std::max<std::uint64_t>(page.total, top->rows.size());
      return page;
    }
    if (top.error().code != storage::StoreError::Code::kUnsupported) {
      return tl::unexpected(top.error());
    }
  }
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
  options.after.reset();
  ListingReader reader(store, std::move(options), kChunk, query.ns);
  for (;;) {
    auto listed = reader.next();
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    if (listed->empty()) {
      break;
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
  }
  std::sort_heap(kept.begin(), kept.end(), before);
  if (offset < kept.size()) {
    page.rows.assign(std::make_move_iterator(kept.begin() + static_cast<std::ptrdiff_t>(offset)),
                     std::make_move_iterator(kept.end()));
  }
  return page;
}

} // namespace kcache::service
