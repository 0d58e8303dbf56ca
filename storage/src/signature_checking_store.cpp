#include <kcache/storage/signature_checking_store.h>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace kcache::storage {

namespace {

// Keys whose rejection was logged; beyond it, rejections are only counted.
constexpr std::size_t kMaxLoggedKeys = 10000;
// Records a listing reads per round trip to check them.
constexpr std::size_t kListCheckBatch = 256;

} // namespace

std::uint64_t SignatureRejections::total() const {
  std::uint64_t sum = 0;
  for (const EventCounter& c : counts_) {
    sum += c.load();
  }
  return sum;
}

bool SignatureRejections::first_time(std::string_view key) {
  std::lock_guard lock(mu_);
  if (logged_.size() >= kMaxLoggedKeys) {
    return false;
  }
  return logged_.emplace(key).second;
}

SignatureCheckingStore::SignatureCheckingStore(std::unique_ptr<Store> inner, SignatureCheck check)
    : inner_(std::move(inner)), check_(std::move(check)) {
  if (!check_.rejections) {
    check_.rejections = std::make_shared<SignatureRejections>();
  }
  if (!check_.trusted) {
    check_.trusted = std::make_shared<const protocol::TrustedKeys>();
  }
  if (!check_.verified) {
    check_.verified = std::make_shared<protocol::VerifiedSignatureCache>();
  }
}

GetResult SignatureCheckingStore::check(Area area, std::string_view key, GetResult got) {
  if (area != Area::kAction || !got || !got->has_value()) {
    return got;
  }
  auto verified = check_.verified->verify(key, **got, *check_.trusted);
  if (verified) {
    return got;
  }
  rejected_.add();
  check_.rejections->add(verified.error().failure);
  if (check_.rejections->first_time(key)) {
    spdlog::warn("{} tier: action record '{}' refused ({}): {}", inner_->name(), key,
                 protocol::failure_name(verified.error().failure), verified.error().message);
  }
  return std::optional<Bytes>{};
}

GetResult SignatureCheckingStore::get(Area area, std::string_view key) {
  return check(area, key, inner_->get(area, key));
}

GetResult SignatureCheckingStore::peek(Area area, std::string_view key) {
  return check(area, key, inner_->peek(area, key));
}

std::vector<GetResult> SignatureCheckingStore::get_many(Area area,
                                                        std::span<const std::string> keys) {
  std::vector<GetResult> results = inner_->get_many(area, keys);
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i] = check(area, keys[i], std::move(results[i]));
  }
  return results;
}

Result<bool> SignatureCheckingStore::contains(Area area, std::string_view key) {
  if (area != Area::kAction) {
    return inner_->contains(area, key);
  }
  auto got = get(area, key);
  if (!got) {
    return tl::unexpected(got.error());
  }
  return got->has_value();
}

Result<void> SignatureCheckingStore::put(Area area, std::string_view key, std::string_view value) {
  return inner_->put(area, key, value);
}

Result<void> SignatureCheckingStore::remove(Area area, std::string_view key) {
  return inner_->remove(area, key);
}

Result<std::vector<ObjectInfo>> SignatureCheckingStore::list(const ListOptions& options) {
  if (!options.servable_only || options.area == Area::kCas) {
    return inner_->list(options); // gc and verify see everything stored
  }
  // Omitted, not marked: GET answers 404 for these, so a listing that showed
  // them would advertise entries nobody can read (and a listing is no place
  // to learn what an attacker planted: that is counted and logged on reads).
  // A page short of its limit for what was omitted goes on after the last
  // entry read, so a short page still means the end.
  std::vector<ObjectInfo> out;
  ListOptions page = options;
  for (;;) {
    auto listed = inner_->list(page);
    if (!listed) {
      return tl::unexpected(listed.error());
    }
    auto kept = servable(std::move(*listed));
    if (!kept) {
      return tl::unexpected(kept.error());
    }
    const bool full = kept->read == page.limit && kept->read > 0;
    std::optional<ListCursor> last = kept->last;
    for (ObjectInfo& info : kept->infos) {
      out.push_back(std::move(info));
    }
    if (!full || out.size() >= options.limit || !last) {
      return out;
    }
    page.after = std::move(last);
    page.limit = options.limit - out.size();
  }
}

Result<TopList> SignatureCheckingStore::list_top(const TopListOptions& options) {
  if (!options.servable_only) {
    return inner_->list_top(options);
  }
  TopListOptions ask = options;
  for (;;) {
    auto top = inner_->list_top(ask);
    if (!top) {
      return top;
    }
    const bool more = top->rows.size() == ask.limit; // the inner store holds more
    auto kept = servable(std::move(top->rows));
    if (!kept) {
      return tl::unexpected(kept.error());
    }
    TopList out{std::move(kept->infos), top->entries, top->entries_exact};
    const bool omitted = out.rows.size() < kept->read;
    // The count includes what was refused: no longer exact once some was.
    out.entries_exact = out.entries_exact && !omitted;
    if (out.rows.size() >= options.limit || !more || !omitted) {
      if (out.rows.size() > options.limit) {
        out.rows.resize(options.limit);
      }
      return out;
    }
    // Refused rows left the page short: ask again for more (each round
    // doubles; the inner store answers in its own order, so the first rows
    // come back the same).
    ask.limit = ask.limit * 2 + 16;
  }
}

Result<SignatureCheckingStore::Servable>
SignatureCheckingStore::servable(std::vector<ObjectInfo> listed) {
  Servable out;
  out.read = listed.size();
  if (!listed.empty()) {
    out.last = ListCursor{listed.back().area, listed.back().key};
  }
  // Checked in batches through the verified cache; not counted as rejections
  // (the counters are for reads).
  std::vector<std::size_t> actions;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    if (listed[i].area == Area::kAction) {
      actions.push_back(i);
    }
  }
  std::vector<bool> refused(listed.size(), false);
  for (std::size_t start = 0; start < actions.size(); start += kListCheckBatch) {
    const std::size_t end = std::min(actions.size(), start + kListCheckBatch);
    std::vector<std::string> keys;
    for (std::size_t j = start; j < end; ++j) {
      keys.push_back(listed[actions[j]].key);
    }
    std::vector<GetResult> got = inner_->get_many(Area::kAction, keys);
    for (std::size_t j = 0; j < keys.size(); ++j) {
      if (!got[j]) {
        return tl::unexpected(got[j].error()); // unchecked: not listed as servable
      }
      refused[actions[start + j]] =
          !got[j]->has_value() || !check_.verified->verify(keys[j], **got[j], *check_.trusted);
    }
  }
  out.infos.reserve(listed.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    if (!refused[i]) {
      out.infos.push_back(std::move(listed[i]));
    }
  }
  return out;
}

CounterSnapshot SignatureCheckingStore::counters() const {
  CounterSnapshot c = inner_->counters();
  const std::uint64_t rejected = rejected_.load();
  c.hits -= std::min(c.hits, rejected);
  c.misses += rejected;
  return c;
}

} // namespace kcache::storage
