#pragma once
// The windows of sorted /v1/entries listings, kept for the pages after the
// first. A filtered sorted listing reads every entry (service/src/entry_pages.h);
// an unfiltered one reads an order index. Its first page (offset 0) keeps
// the whole window a listing may page through, and a later page of the same
// listing (same order, filters and reader) is cut from it while it is fresh.
// Paging then costs a page, not the store, and rows do not move between the
// pages of one listing while entries change. A first page always reads
// afresh, so a listing after a put shows it.
//
// Bounded: kMaxWindows windows of at most RequestHandler::kMaxEntriesPage rows.

#include <kcache/storage/store.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kcache::service {

class SortedWindows {
public:
  struct Window {
    std::vector<storage::ObjectInfo> rows; // the listing's first rows, in its order
    std::uint64_t total = 0;               // entries the listing's filters accepted
    bool total_estimated = false;          // SortedPage::total_estimated
    // Whether `rows` holds the rows [offset, offset + limit) of the listing.
    // An estimated total (several tiers) may equal the rows while more
    // follow: only an exact one says the window holds the whole listing.
    bool covers(std::size_t offset, std::size_t limit) const {
      return offset + limit <= rows.size() || (!total_estimated && rows.size() == total);
    }
  };

  static constexpr std::size_t kMaxWindows = 8;
  static constexpr std::chrono::seconds kFreshFor{120};

  // The window kept for `listing` when it is fresh; null otherwise.
  std::shared_ptr<const Window> find(const std::string& listing) const;
  // Keeps `window` for `listing`, in place of an older one; the least
  // recently kept goes when there are kMaxWindows.
  void keep(const std::string& listing, std::shared_ptr<const Window> window);

private:
  struct Kept {
    std::string listing;
    std::shared_ptr<const Window> window;
    std::chrono::steady_clock::time_point at;
  };
  mutable std::mutex mu_;
  std::list<Kept> kept_; // most recently kept first
};

} // namespace kcache::service
