#include <kcache/storage/tiered_store.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace kcache::storage {

TieredStore::TieredStore(std::vector<std::unique_ptr<Store>> tiers,
                         std::optional<std::size_t> durable_tier)
    : tiers_(std::move(tiers)),
      durable_(std::min(durable_tier.value_or(SIZE_MAX), tiers_.empty() ? 0 : tiers_.size() - 1)) {}

void TieredStore::note_tier_error(std::size_t tier, const StoreError& error) {
  absorbed_errors_.add();
  spdlog::debug("tier {} ({}) failed: {}", tier, tiers_[tier]->name(), error.message);
}

void TieredStore::note_put_error(std::size_t tier, Area area, std::string_view key,
                                 const StoreError& error) {
  // A size policy is no failure; a breaker's refusal repeats its tier's outage.
  if (error.code == StoreError::Code::kTooLarge) {
    return;
  }
  absorbed_errors_.add();
  spdlog::log(error.rejected ? spdlog::level::debug : spdlog::level::warn,
              "tier {} ({}) failed to store {} '{}' ({}): {}", tier, tiers_[tier]->name(),
              area_name(area), key, error_code_name(error.code), error.message);
}

void TieredStore::backfill(std::size_t below, Area area, std::string_view key, const Bytes& value) {
  for (std::size_t i = 0; i < below; ++i) {
    if (auto ok = tiers_[i]->put(area, key, value); ok) {
      backfills_.add();
    } else if (ok.error().code != StoreError::Code::kTooLarge) {
      note_tier_error(i, ok.error());
    }
  }
}

void TieredStore::backfill(std::size_t below, Area area, std::string_view key,
                           const SharedBytes& value) {
  for (std::size_t i = 0; i < below; ++i) {
    if (auto ok = tiers_[i]->put_shared(area, key, value); ok) {
      backfills_.add();
    } else if (ok.error().code != StoreError::Code::kTooLarge) {
      note_tier_error(i, ok.error());
    }
  }
}

template <typename R, typename Read>
R TieredStore::read_through(Area area, std::string_view key, Read read) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    R r = read(*tiers_[i], key);
    if (!r) {
      note_tier_error(i, r.error());
      continue;
    }
    if (r->has_value()) {
      backfill(i, area, key, **r);
      return r;
    }
  }
  return typename R::value_type{};
}

template <typename R, typename Read>
std::vector<R> TieredStore::read_many_through(Area area, std::span<const std::string> keys,
                                              Read read) {
  std::vector<R> out(keys.size(), typename R::value_type{});
  std::vector<std::size_t> pending(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    pending[i] = i;
  }
  for (std::size_t t = 0; t < tiers_.size() && !pending.empty(); ++t) {
    std::vector<std::string> ask;
    ask.reserve(pending.size());
    for (std::size_t i : pending) {
      ask.push_back(keys[i]);
    }
    std::vector<R> got = read(*tiers_[t], std::span<const std::string>(ask));
    std::vector<std::size_t> still;
    for (std::size_t j = 0; j < pending.size(); ++j) {
      if (!got[j]) {
        note_tier_error(t, got[j].error());
        still.push_back(pending[j]);
      } else if (got[j]->has_value()) {
        backfill(t, area, keys[pending[j]], **got[j]);
        out[pending[j]] = std::move(got[j]);
      } else {
        still.push_back(pending[j]);
      }
    }
    pending = std::move(still);
  }
  return out;
}

GetResult TieredStore::get(Area area, std::string_view key) {
  return read_through<GetResult>(
      area, key, [area](Store& tier, std::string_view k) { return tier.get(area, k); });
}

SharedGetResult TieredStore::get_shared(Area area, std::string_view key) {
  return read_through<SharedGetResult>(
      area, key, [area](Store& tier, std::string_view k) { return tier.get_shared(area, k); });
}

GetResult TieredStore::peek(Area area, std::string_view key) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    GetResult r = tiers_[i]->peek(area, key);
    if (r && r->has_value()) {
      return r;
    }
  }
  return std::optional<Bytes>{};
}

std::vector<GetResult> TieredStore::get_many(Area area, std::span<const std::string> keys) {
  return read_many_through<GetResult>(
      area, keys,
      [area](Store& tier, std::span<const std::string> ks) { return tier.get_many(area, ks); });
}

std::vector<SharedGetResult> TieredStore::get_many_shared(Area area,
                                                          std::span<const std::string> keys) {
  return read_many_through<SharedGetResult>(area, keys,
                                            [area](Store& tier, std::span<const std::string> ks) {
                                              return tier.get_many_shared(area, ks);
                                            });
}

Result<void> TieredStore::put(Area area, std::string_view key, std::string_view value) {
  if (tiers_.empty()) {
    return tl::unexpected(StoreError{StoreError::Code::kUnavailable, "no storage tiers"});
  }
  if (auto ok = tiers_[durable_]->put(area, key, value); !ok) {
    // A full disk is logged once per episode by its tier, not once per put.
    const StoreError::Code code = ok.error().code;
    if (code != StoreError::Code::kTooLarge) {
      spdlog::log(code == StoreError::Code::kNoSpace ? spdlog::level::debug : spdlog::level::warn,
                  "{} not stored: durable tier {} ({}) failed ({}): {}", area_name(area), durable_,
                  tiers_[durable_]->name(), error_code_name(ok.error().code), ok.error().message);
    }
    return ok;
  }
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (i == durable_) {
      continue;
    }
    if (auto ok = tiers_[i]->put(area, key, value); !ok) {
      note_put_error(i, area, key, ok.error());
    }
  }
  return {};
}

Result<bool> TieredStore::contains(Area area, std::string_view key) {
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    auto r = tiers_[i]->contains(area, key);
    if (!r) {
      note_tier_error(i, r.error());
    } else if (*r) {
      return true;
    }
  }
  return false;
}

Result<void> TieredStore::remove(Area area, std::string_view key) {
  std::optional<StoreError> first_error;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    if (auto ok = tiers_[i]->remove(area, key); !ok) {
      note_tier_error(i, ok.error());
      first_error = first_error.value_or(ok.error());
    }
  }
  if (first_error) {
    return tl::unexpected(*first_error);
  }
  return {};
}

namespace {

void merge_listed(ObjectInfo& merged, const ObjectInfo& other) {
  // The largest of each, so an order by any of them (list_top) can be
  // merged from the tiers' own orders; reads add up, as each tier counts
  // the reads it served.
  merged.size = std::max(merged.size, other.size);
  merged.created_ms = std::max(merged.created_ms, other.created_ms);
  merged.last_access_ms = std::max(merged.last_access_ms, other.last_access_ms);
  merged.hits += other.hits;
}

} // namespace

Result<std::vector<ObjectInfo>> TieredStore::list(const ListOptions& options) {
  const auto before = [](const ObjectInfo& a, const ObjectInfo& b) {
    return std::tie(a.area, a.key) < std::tie(b.area, b.key);
  };
  std::vector<std::vector<ObjectInfo>> lists;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    auto r = tiers_[i]->list(options);
    if (!r) {
      note_tier_error(i, r.error());
      continue;
    }
    // Each tier lists in key order (store.h); one that does not is sorted
    // here rather than merged wrong.
    if (!std::is_sorted(r->begin(), r->end(), before)) {
      std::sort(r->begin(), r->end(), before);
    }
    lists.push_back(std::move(*r));
  }
  // A merge of the tiers' ordered lists (no map of every entry): an entry
  // several tiers hold is one row, the faster tier's first.
  std::vector<std::size_t> at(lists.size(), 0);
  std::vector<ObjectInfo> out;
  while (out.size() < options.limit) {
    std::size_t first = lists.size();
    for (std::size_t i = 0; i < lists.size(); ++i) {
      if (at[i] < lists[i].size() &&
          (first == lists.size() || before(lists[i][at[i]], lists[first][at[first]]))) {
        first = i;
      }
    }
    if (first == lists.size()) {
      break;
    }
    ObjectInfo merged = std::move(lists[first][at[first]++]);
    for (std::size_t i = first + 1; i < lists.size(); ++i) {
      if (at[i] == lists[i].size()) {
        continue;
      }
      const ObjectInfo& info = lists[i][at[i]];
      if (info.area != merged.area || info.key != merged.key) {
        continue;
      }
      merge_listed(merged, info);
      ++at[i];
    }
    out.push_back(std::move(merged));
  }
  return out;
}

bool TieredStore::lists_by_seek() const {
  return std::all_of(tiers_.begin(), tiers_.end(),
                     [](const std::unique_ptr<Store>& tier) { return tier->lists_by_seek(); });
}

Result<std::vector<std::optional<ObjectInfo>>>
TieredStore::describe(std::span<const ListCursor> entries) {
  std::vector<std::optional<ObjectInfo>> out(entries.size());
  for (std::size_t t = 0; t < tiers_.size(); ++t) {
    auto rows = tiers_[t]->describe(entries);
    if (!rows) {
      note_tier_error(t, rows.error());
      continue;
    }
    for (std::size_t i = 0; i < entries.size() && i < rows->size(); ++i) {
      if (!(*rows)[i]) {
        continue;
      }
      if (out[i]) {
        merge_listed(*out[i], *(*rows)[i]);
      } else {
        out[i] = std::move((*rows)[i]);
      }
    }
  }
  return out;
}

Result<TopList> TieredStore::list_top(const TopListOptions& options) {
  using Id = std::pair<Area, std::string>;
  TopListOptions ask = options;
  for (int round = 0;; ++round) {
    // Each tier's top `ask.limit`; an entry several hold is merged from all.
    std::map<Id, ObjectInfo> rows;
    std::vector<std::vector<bool>> seen_in(tiers_.size());
    std::vector<TopList> lists(tiers_.size());
    std::vector<bool> answered(tiers_.size(), false);
    std::uint64_t entries = 0;
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      auto top = tiers_[t]->list_top(ask);
      if (!top) {
        if (top.error().code == StoreError::Code::kUnsupported) {
          return top;
        }
        note_tier_error(t, top.error());
        continue;
      }
      answered[t] = true;
      entries = std::max(entries, top->entries);
      lists[t] = std::move(*top);
    }
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      for (const ObjectInfo& info : lists[t].rows) {
        auto [it, fresh] = rows.try_emplace(Id{info.area, info.key}, info);
        if (!fresh) {
          merge_listed(it->second, info);
        }
      }
    }
    // Complete each row from the tiers whose top it was not in: their
    // share of its hits and the rest of its fields.
    for (std::size_t t = 0; t < tiers_.size(); ++t) {
      if (!answered[t]) {
        continue;
      }
      std::set<Id> listed_here;
      for (const ObjectInfo& info : lists[t].rows) {
        listed_here.emplace(info.area, info.key);
      }
      std::vector<ListCursor> missing;
      for (const auto& [id, info] : rows) {
        if (!listed_here.contains(id)) {
          missing.push_back(ListCursor{id.first, id.second});
        }
      }
      if (missing.empty()) {
        continue;
      }
      auto found = tiers_[t]->describe(missing);
      if (!found) {
        note_tier_error(t, found.error());
        continue;
      }
      for (std::size_t i = 0; i < missing.size() && i < found->size(); ++i) {
        if ((*found)[i]) {
          merge_listed(rows.at(Id{missing[i].area, missing[i].key}), *(*found)[i]);
        }
      }
    }
    TopList out;
    out.entries = entries;
    out.entries_exact = tiers_.size() == 1;
    for (auto& [id, info] : rows) {
      out.rows.push_back(std::move(info));
    }
    const auto before = [&options](const ObjectInfo& a, const ObjectInfo& b) {
      return comes_before(a, b, options.order);
    };
    std::sort(out.rows.begin(), out.rows.end(), before);
    // Sizes and times merge as the largest of the tiers' values, so an entry
    // in no tier's top `ask.limit` has at least that many before it: the
    // page is exact. Hits add up: an entry in no top list may have up to
    // the sum of each full list's last value; read further until the page's
    // last row is past that.
    bool exact = true;
    if (options.order == ListOrder::kHits) {
      // An entry in no tier's top list comes after each full list's last row
      // in that tier: its hits there are at most that row's, and when equal
      // its key is greater. So its sum is at most `unseen_most`, and when
      // equal its key is past `last_of_full`: the page is exact when its last
      // row is ahead of that.
      std::uint64_t unseen_most = 0;
      bool any_full = false;
      std::pair<Area, std::string> last_of_full{Area::kAction, ""};
      for (std::size_t t = 0; t < tiers_.size(); ++t) {
        if (answered[t] && lists[t].rows.size() == ask.limit && !lists[t].rows.empty()) {
          const ObjectInfo& last = lists[t].rows.back();
          unseen_most += last.hits;
          last_of_full = std::max(last_of_full, std::pair{last.area, last.key});
          any_full = true;
        }
      }
      if (any_full) {
        exact = false;
        if (options.limit > 0 && out.rows.size() >= options.limit) {
          const ObjectInfo& edge = out.rows[options.limit - 1];
          exact = edge.hits > unseen_most ||
                  (edge.hits == unseen_most && std::pair{edge.area, edge.key} <= last_of_full);
        } else if (options.limit == 0) {
          exact = true;
        }
      }
    }
    // One more round at most: on a plateau of equal hits no depth is exact,
    // and each round reads every tier's top again.
    if (exact || round == 1) {
      if (!exact) {
        return tl::unexpected(StoreError{StoreError::Code::kUnsupported,
                                         "hits spread over the tiers: no exact top list"});
      }
      if (out.rows.size() > options.limit) {
        out.rows.resize(options.limit);
      }
      return out;
    }
    ask.limit = ask.limit * 2 + 64;
  }
}

} // namespace kcache::storage
