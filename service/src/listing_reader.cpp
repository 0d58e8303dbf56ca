#include "listing_reader.h"

#include <algorithm>

namespace kcache::service {

using storage::Area;
using storage::ListCursor;
using storage::ObjectInfo;

namespace {

// As key_namespace.cpp's.
bool is_kind_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

// The key just past every key that starts with `prefix`'s first `n` bytes
// followed by the byte after them: that byte plus one. Nullopt when the byte
// is the largest (no key then follows them all).
std::optional<std::string> past(std::string_view key, std::size_t n) {
  if (static_cast<unsigned char>(key[n]) == 0xff) {
    return std::nullopt;
  }
  std::string out(key.substr(0, n));
  out.push_back(static_cast<char>(key[n] + 1));
  return out;
}

// Where a record of the namespace can be, given a key found at the walk's
// position: the range to read (empty: none here) and the key past which the
// walk goes on (nullopt: this key only).
struct Region {
  std::string range;
  std::optional<std::string> resume_past;
};

Region region_of(std::string_view key, std::string_view ns) {
  if (key.starts_with("kc1-")) {
    return {"kc1-", past(key, 3)}; // manifests: the namespace is in the record
  }
  if (key.starts_with("kcc-")) {
    return {"", past(key, 3)}; // compile keys: no namespace
  }
  std::size_t i = 0;
  while (i < key.size() && is_kind_char(key[i])) {
    ++i;
  }
  if (i == key.size()) {
    return {"", std::nullopt}; // no ':' at all: this key has no namespace
  }
  if (i > 0 && key[0] >= 'a' && key[0] <= 'z' && key[i] == ':') {
    // Kind K: its records of `ns` start with "K:ns:", and every key of K
    // sorts before "K;".
    return {std::string(key.substr(0, i + 1)) + std::string(ns) + ":", past(key, i)};
  }
  // A byte no kind has at i (or a key not starting a-z): no key starting as
  // this one does up to i has a namespace.
  return {"", past(key, key[0] >= 'a' && key[0] <= 'z' ? i : 0)};
}

} // namespace

ListingReader::ListingReader(storage::Store& store, storage::ListOptions options, std::size_t chunk,
                             std::string ns)
    : store_(store), options_(std::move(options)), user_prefix_(options_.prefix),
      ns_(std::move(ns)) {
  options_.limit = std::max<std::size_t>(chunk, 1);
  if (!ns_.empty()) {
    // Namespaces are of action records.
    if ((options_.area && *options_.area != Area::kAction) ||
        (options_.after && options_.after->area != Area::kAction)) {
      done_ = true;
    }
    options_.area = Area::kAction;
    if (!store_.lists_by_seek()) {
      // Each seek would scan the whole store (Redis): read on instead, once.
      read_on_ = true;
    }
  }
}

storage::Result<bool> ListingReader::next_range() {
  for (;;) {
    if (read_on_ || seeks_ >= kMaxSeeks) {
      // Too many ranges without a kind (or a store that cannot seek): read
      // on, the caller's filter decides.
      options_.prefix = user_prefix_;
      range_end_.clear();
      in_range_ = true;
      return true;
    }
    storage::ListOptions probe;
    probe.area = Area::kAction;
    probe.prefix = user_prefix_;
    probe.after = options_.after;
    probe.limit = 1;
    probe.servable_only = false; // a seek: whether the key is served is not asked here
    ++seeks_;
    auto found = store_.list(probe);
    if (!found) {
      return tl::unexpected(found.error());
    }
    if (found->empty()) {
      return false;
    }
    const std::string& key = found->front().key;
    Region region = region_of(key, ns_);
    // Within the caller's prefix: the longer of the two, when one holds the other.
    std::string range = std::move(region.range);
    if (!range.empty() && !user_prefix_.empty()) {
      if (user_prefix_.starts_with(range)) {
        range = user_prefix_;
      } else if (!range.starts_with(user_prefix_)) {
        range.clear();
      }
    }
    if (!range.empty()) {
      options_.prefix = std::move(range);
      // The range is read from the cursor on (the probe's key is in it when
      // it matches); the walk then goes on past the region.
      range_end_ = region.resume_past.value_or(key);
      in_range_ = true;
      return true;
    }
    if (!region.resume_past) {
      options_.after = ListCursor{Area::kAction, key}; // past this key only
      continue;
    }
    // Past the region: "after" a key no stored key equals (one byte past
    // the region's last possible byte), so the next key found starts there.
    options_.after = ListCursor{Area::kAction, *region.resume_past};
    // A key equal to resume_past itself would be skipped: it can only be a
    // key of no namespace (its byte at the region's end has no kind), or
    // "kc1."/"kcc." (neither a manifest nor of a namespace).
  }
}

storage::Result<std::vector<ObjectInfo>> ListingReader::next() {
  while (!done_) {
    if (ns_.empty()) {
      auto listed = store_.list(options_);
      if (!listed) {
        return listed;
      }
      if (listed->size() < options_.limit) {
        done_ = true;
      } else {
        options_.after = ListCursor{listed->back().area, listed->back().key};
      }
      return listed;
    }
    if (!in_range_) {
      auto more = next_range();
      if (!more) {
        return tl::unexpected(more.error());
      }
      if (!*more) {
        done_ = true;
        break;
      }
    }
    auto listed = store_.list(options_);
    if (!listed) {
      return listed;
    }
    if (!listed->empty()) {
      options_.after = ListCursor{listed->back().area, listed->back().key};
    }
    if (listed->size() < options_.limit) {
      // The range is read: go on past its region (or, read on, the end).
      in_range_ = false;
      if (range_end_.empty()) {
        done_ = true;
      } else if (!options_.after || options_.after->key < range_end_) {
        options_.after = ListCursor{Area::kAction, range_end_};
      }
      options_.prefix = user_prefix_;
    }
    if (!listed->empty()) {
      return listed;
    }
  }
  return std::vector<ObjectInfo>{};
}

} // namespace kcache::service
