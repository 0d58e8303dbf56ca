#pragma once
// Pages of GET /v1/entries over a store of any size, in bounded memory: the
// listing is read in chunks through Store::list's cursor (ListOptions::after),
// never whole.
//   key_page:    entries in key order after a cursor; one seek and about a
//                page of reads in an ordered tier, however many it holds.
//   sorted_page: by size, hits, last access or creation. Unfiltered (an
//                area aside), from the store's order index (Store::list_top: RocksDB keeps one,
//                the memory tier walks its LRU list or its entries): about
//                offset + limit reads. Filtered, or over a tier without an
//                index (Redis), every entry is read, in chunks, and only the
//                best offset + limit are kept (a heap); the count is exact.

#include <kcache/storage/store.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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
// order after options.after, reading at most `max_examined` entries. With
// `ns`, only where records of that namespace can be (listing_reader.h);
// `keep` still decides each one.
storage::Result<KeyPage> key_page(storage::Store& store, storage::ListOptions options,
                                  std::size_t limit, const EntryFilter& keep,
                                  std::size_t max_examined, const std::string& ns = {});

enum class EntrySort { kLastAccess, kSize, kHits, kCreated, kKey };
// "last_access", "size", "hits", "created" or "key".
std::optional<EntrySort> parse_entry_sort(std::string_view name);

struct SortedPage {
  std::vector<storage::ObjectInfo> rows;
  std::uint64_t total = 0;      // entries `keep` accepted
  bool total_estimated = false; // the store's entry count, known only roughly (TopList)
  bool indexed = false;         // served from an order index, not a read of every entry
};

// Entries [offset, offset + limit) of those `keep` accepts, in `sort`'s
// order (largest, most hit or newest first; keys ascending), ties by key.
// Holds offset + limit entries and one chunk at most. `keep_all` says that
// `keep` accepts every entry: then, with no prefix in `options` (an area is
// fine), a store with an order index serves the page, and `indexed_limit`
// rows (at most `limit`) are enough: a page after them is cheap to read again.
struct SortedQuery {
  EntrySort sort = EntrySort::kLastAccess;
  std::size_t offset = 0;
  std::size_t limit = 0;
  std::size_t indexed_limit = SIZE_MAX;
  bool keep_all = false;
  std::string ns; // only where records of this namespace can be (listing_reader.h)
};
storage::Result<SortedPage> sorted_page(storage::Store& store, storage::ListOptions options,
                                        const SortedQuery& query, const EntryFilter& keep);

} // namespace kcache::service
