#pragma once
// Pages of GET /v1/entries over a store of any size, in bounded memory: the
// listing is read in chunks through Store::list's cursor (ListOptions::after),
// never whole.
//   key_page:    entries in key order after a cursor; one seek and about a
//                page of reads in an ordered tier, however many it holds.
//   sorted_page: by size, hits, last access or creation. No tier keeps those
//                in order, so every entry is read, in chunks, and only the
//                best offset + limit are kept (a heap); the count is exact.

#include <kcache/storage/store.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace kcache::service {

// Whether a listed entry belongs in the page (a token's namespaces, ?namespace=).
using EntryFilter = std::function<bool(const storage::ObjectInfo&)>;

struct KeyPage {
  std::vector<storage::ObjectInfo> rows;
  // Where the next page starts: after the last row, or after the last entry
  // examined when `max_examined` ran out first; nullopt at the end.
  std::optional<storage::ListCursor> next;
  std::size_t examined = 0; // entries read, kept or not
};

// Up to `limit` (at least 1) entries that `keep` accepts, in (area, key)
// order after options.after, reading at most `max_examined` entries.
storage::Result<KeyPage> key_page(storage::Store& store, storage::ListOptions options,
                                  std::size_t limit, const EntryFilter& keep,
                                  std::size_t max_examined);

enum class EntrySort { kLastAccess, kSize, kHits, kCreated, kKey };
// "last_access", "size", "hits", "created" or "key".
std::optional<EntrySort> parse_entry_sort(std::string_view name);

struct SortedPage {
  std::vector<storage::ObjectInfo> rows;
  std::uint64_t total = 0; // entries `keep` accepted
};

// Entries [offset, offset + limit) of those `keep` accepts, in `sort`'s
// order (largest, most hit or newest first; keys ascending), ties by key.
// Holds offset + limit entries and one chunk at most.
storage::Result<SortedPage> sorted_page(storage::Store& store, storage::ListOptions options,
                                        EntrySort sort, std::size_t offset, std::size_t limit,
                                        const EntryFilter& keep);

} // namespace kcache::service
