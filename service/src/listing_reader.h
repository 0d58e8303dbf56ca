#pragma once
// A listing read chunk by chunk in key order (Store::list after a cursor),
// for the pages of GET /v1/entries (entry_pages.h). With a namespace it reads
// only the key ranges that namespace's records can be in, skipping the rest
// by seeks: "<kind>:<ns>:" for each kind the store holds, found by seeking
// past one kind at a time, and the kc1- manifests (their namespace is in the
// record, so they are read and the caller's filter decides). A page of a
// small namespace then costs its own entries and a seek per kind, not the
// store. Over a store whose list() scans rather than seeks (Redis:
// Store::lists_by_seek), it reads on as without a namespace and the caller's
// filter decides. Key shapes as key_namespace.h reads them.

#include <kcache/storage/store.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kcache::service {

class ListingReader {
public:
  // `options`: area, prefix and cursor as Store::list takes them; its limit is
  // replaced by `chunk`. `ns` empty: every entry. Otherwise only action
  // records, and only where a record of `ns` can be.
  ListingReader(storage::Store& store, storage::ListOptions options, std::size_t chunk,
                std::string ns);

  // The next entries in key order, at most `chunk`; empty at the end.
  storage::Result<std::vector<storage::ObjectInfo>> next();

  // Seeks made to skip ranges of other namespaces (for tests and benches).
  std::size_t seeks() const { return seeks_; }

  // Seeks after which the reader stops skipping and reads on: a store of
  // many keys without a kind would otherwise cost a seek per key.
  static constexpr std::size_t kMaxSeeks = 256;

private:
  // Finds the next range to read after the cursor; false at the end.
  storage::Result<bool> next_range();

  storage::Store& store_;
  storage::ListOptions options_; // area, prefix, cursor (after) and chunk as limit
  const std::string user_prefix_;
  const std::string ns_;
  bool done_ = false;
  bool read_on_ = false;  // the store scans: no seeks, every entry read
  bool in_range_ = false; // options_.prefix holds a range being read
  std::string range_end_; // where the walk goes on after that range (exclusive)
  std::size_t seeks_ = 0;
};

} // namespace kcache::service
