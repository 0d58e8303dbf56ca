#include "redis_order_index.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

namespace kcache::storage::detail {
namespace {

constexpr Area kAreas[] = {Area::kAction, Area::kCas};
constexpr std::size_t kFlushAt = 256;                 // recorded reads that trigger a write
constexpr auto kFlushEvery = std::chrono::seconds(1); // ... or the age of the batch
constexpr std::int64_t kTrimEveryMs = 2'000;
constexpr long kTrimWindow = 128;              // NOLINT(google-runtime-int): Redis' rank type
constexpr std::int64_t kBuildLockMs = 600'000; // a build's claim, should its kcached die
constexpr std::size_t kRetryCommands = 30'000; // failed index writes kept (~10,000 entries)
constexpr std::size_t kMaxRound = 1000;        // keys asked per round trip

StoreError redis_error(std::string_view what, const RedisReply& reply) {
  return StoreError{StoreError::Code::kIo,
                    "redis " + std::string(what) + ": " +
                        (reply.is_error() ? reply.str : std::string("unexpected reply"))};
}

// A score as Redis prints it: integers exactly (sizes and unix ms are far
// below 2^53, where doubles stop being exact).
std::string score(std::int64_t value) {
  return std::to_string(value);
}

std::int64_t parse_score(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::kString) {
    return 0;
  }
  const double d = std::strtod(reply.str.c_str(), nullptr);
  return std::isfinite(d) ? static_cast<std::int64_t>(std::llround(d)) : 0;
}

// Escapes glob characters so a key prefix matches literally in SCAN MATCH.
std::string glob_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// The first string after every string that starts with `prefix`, as a
// ZRANGEBYLEX bound ("(" + it), or "+" when there is none (all 0xff).
std::string after_prefix_bound(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) {
    prefix.pop_back();
  }
  if (prefix.empty()) {
    return "+";
  }
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return "(" + prefix;
}

// Keys to ask for when `wanted` more rows are needed: a few more, for the
// ones found gone (`wanted` may be SIZE_MAX: no limit).
std::size_t next_round(std::size_t wanted) {
  return wanted >= kMaxRound ? kMaxRound : wanted + 8;
}

// The next round's multiplier: larger while rounds come back mostly gone.
std::size_t next_boost(std::size_t boost, std::size_t gone, std::size_t asked) {
  return gone > asked / 2 ? std::min(boost * 4, kMaxRound) : 1;
}

bool all_ok(const std::vector<RedisReply>& replies) {
  return std::none_of(replies.begin(), replies.end(),
                      [](const RedisReply& r) { return r.is_error(); });
}

} // namespace

std::string redis_value_key(std::string_view ns, Area area, std::string_view key) {
  std::string out(ns);
  out += ':';
  out += area_name(area);
  out += ':';
  out += key;
  return out;
}

RedisOrderIndex::RedisOrderIndex(RedisClient& client, std::string ns,
                                 std::optional<std::chrono::seconds> ttl)
    : client_(client), ns_(std::move(ns)), tag_("{" + ns_ + "}"), ttl_(ttl) {}

RedisOrderIndex::~RedisOrderIndex() {
  (void)flush_reads();
}

std::string RedisOrderIndex::set_key(Area area, Set set) const {
  static constexpr std::string_view kNames[] = {"key", "size", "access", "stored"};
  return ns_ + ":idx:" + tag_ + ":" + std::string(area_name(area)) + ":" +
         std::string(kNames[static_cast<int>(set)]);
}

std::string RedisOrderIndex::built_key() const {
  return ns_ + ":idx:" + tag_ + ":built-v1";
}

std::vector<RedisOrderIndex::Set> RedisOrderIndex::sets() const {
  if (ttl_) {
    return {Set::kKey, Set::kSize, Set::kAccess, Set::kStored};
  }
  return {Set::kKey, Set::kSize, Set::kAccess};
}

RedisOrderIndex::Routed RedisOrderIndex::index_commands(Area area, std::string_view key,
                                                        std::uint64_t size,
                                                        std::int64_t now_ms) const {
  const std::string member(key);
  Routed out;
  out.emplace_back(built_key(), RedisCommand{"ZADD", set_key(area, Set::kKey), "0", member});
  out.emplace_back(built_key(), RedisCommand{"ZADD", set_key(area, Set::kSize),
                                             score(-static_cast<std::int64_t>(size)), member});
  out.emplace_back(built_key(),
                   RedisCommand{"ZADD", set_key(area, Set::kAccess), score(-now_ms), member});
  if (ttl_) { // when its TTL ends it
    out.emplace_back(built_key(),
                     RedisCommand{"ZADD", set_key(area, Set::kStored), score(now_ms), member});
  }
  return out;
}

void RedisOrderIndex::index_failed(Routed commands, std::string_view why) {
  if (!index_failing_.exchange(true)) {
    spdlog::warn("redis: entries of namespace '{}' stored but not yet indexed ({}): retried "
                 "every 2 s",
                 ns_, why);
  }
  const std::lock_guard lock(retry_mu_);
  if (retry_.size() + commands.size() > kRetryCommands) {
    retry_overflowed_ = true; // too many to keep: the whole namespace is indexed again instead
    retry_.clear();
    return;
  }
  std::move(commands.begin(), commands.end(), std::back_inserter(retry_));
}

void RedisOrderIndex::retry_failed_writes() {
  Routed batch;
  bool overflowed = false;
  {
    const std::lock_guard lock(retry_mu_);
    batch.swap(retry_);
    overflowed = std::exchange(retry_overflowed_, false);
  }
  if (overflowed) {
    // Deleting the mark has the next listing SCAN the namespace, which
    // indexes what the lost writes would have.
    auto dropped = client_.run(built_key(), {"DEL", built_key()});
    if (!dropped || dropped->is_error()) {
      const std::lock_guard lock(retry_mu_);
      retry_overflowed_ = true;
    } else {
      spdlog::warn("redis: more index writes of namespace '{}' failed than are kept: the next "
                   "listing indexes the namespace again",
                   ns_);
    }
  }
  if (batch.empty()) {
    return;
  }
  auto written = client_.run_many(batch);
  if (!written || written->size() != batch.size() || !all_ok(*written)) {
    index_failed(std::move(batch), written ? "refused" : written.error().message);
  }
}

void RedisOrderIndex::index_written() {
  if (index_failing_.exchange(false)) {
    spdlog::info("redis: the listing index of namespace '{}' is written again", ns_);
  }
}

bool RedisOrderIndex::drop_unless_stored(Area area, std::span<const std::string> keys) {
  if (keys.empty()) {
    return true;
  }
  std::vector<RedisCommand> drops;
  for (const Set set : sets()) {
    RedisCommand zrem{"ZREM", set_key(area, set)};
    zrem.insert(zrem.end(), keys.begin(), keys.end());
    drops.push_back(std::move(zrem));
  }
  auto dropped = client_.pipeline(built_key(), std::move(drops));
  // A put stores its value before it indexes it: one that indexed a key just
  // before the ZREM has its value stored by now. Those go back in.
  Routed look;
  for (const std::string& key : keys) {
    const std::string value = redis_value_key(ns_, area, key);
    look.emplace_back(value, RedisCommand{"EXISTS", value});
    look.emplace_back(value, RedisCommand{"STRLEN", value});
  }
  auto stored = client_.run_many(std::move(look));
  if (!stored || stored->size() != 2 * keys.size()) {
    return false; // a put raced this drop and Redis failed here, both at once: left as it is
  }
  Routed back;
  const std::int64_t now = unix_now_ms();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const RedisReply& exists = (*stored)[2 * i];
    if (exists.type == RedisReply::Type::kInteger && exists.integer == 1) {
      auto again = index_commands(
          area, keys[i],
          static_cast<std::uint64_t>(std::max<long long>((*stored)[2 * i + 1].integer, 0)), now);
      std::move(again.begin(), again.end(), std::back_inserter(back));
    }
  }
  if (!back.empty()) {
    auto readded = client_.run_many(back);
    if (!readded || !all_ok(*readded)) {
      index_failed(std::move(back), "a key stored again could not be indexed again");
      return false;
    }
  }
  return dropped && all_ok(*dropped);
}

void RedisOrderIndex::record_read(Area area, std::string_view key, std::int64_t now_ms) {
  bool due = false;
  {
    const std::lock_guard lock(reads_mu_);
    auto [it, added] = reads_.try_emplace({area, std::string(key)}, now_ms);
    it->second = std::max(it->second, now_ms);
    due =
        reads_.size() >= kFlushAt || std::chrono::steady_clock::now() - last_flush_ >= kFlushEvery;
  }
  if (due) {
    (void)flush_reads(); // a lost batch only makes entries look less recently read
  }
}

Result<void> RedisOrderIndex::flush_reads() {
  std::map<std::pair<Area, std::string>, std::int64_t> batch;
  {
    const std::lock_guard lock(reads_mu_);
    batch.swap(reads_);
    last_flush_ = std::chrono::steady_clock::now();
  }
  if (batch.empty()) {
    return {};
  }
  // XX: a read never puts back a key removed meanwhile; LT: only a newer read
  // moves a key (scores are negated times).
  std::vector<RedisCommand> commands;
  for (const Area area : kAreas) {
    RedisCommand zadd{"ZADD", set_key(area, Set::kAccess), "XX", "LT"};
    for (const auto& [entry, ms] : batch) {
      if (entry.first == area) {
        zadd.push_back(score(-ms));
        zadd.push_back(entry.second);
      }
    }
    if (zadd.size() > 4) {
      commands.push_back(std::move(zadd));
    }
  }
  auto replies = client_.pipeline(built_key(), std::move(commands));
  if (!replies) {
    return tl::unexpected(replies.error());
  }
  for (const RedisReply& r : *replies) {
    if (r.is_error()) {
      return tl::unexpected(redis_error("ZADD", r));
    }
  }
  return {};
}

void RedisOrderIndex::trim_if_due() {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t due = next_trim_ms_.load();
  if (now < due || !next_trim_ms_.compare_exchange_strong(due, now + kTrimEveryMs)) {
    return; // not yet, or another thread trims
  }
  retry_failed_writes();
  // Where values go without a remove: LRU eviction takes the least recently
  // read (the access set's end), a TTL the oldest stored (the stored set's
  // start, with a TTL only), anything else anywhere: a window that walks the
  // whole access set, a turn per about (entries / 128) x 2 s.
  const long sweep = sweep_rank_.fetch_add(kTrimWindow); // NOLINT(google-runtime-int)
  for (const Area area : kAreas) {
    std::vector<RedisCommand> looks = {
        {"ZRANGE", set_key(area, Set::kAccess), std::to_string(-kTrimWindow), "-1"},
        {"ZRANGE", set_key(area, Set::kAccess), std::to_string(sweep),
         std::to_string(sweep + kTrimWindow - 1)}};
    if (ttl_) {
      const std::int64_t expired = unix_now_ms() - ttl_->count() * 1000;
      looks.push_back({"ZRANGEBYSCORE", set_key(area, Set::kStored), "-inf", score(expired),
                       "LIMIT", "0", std::to_string(kMaxRound)});
    }
    auto found = client_.pipeline(built_key(), std::move(looks));
    if (!found || !all_ok(*found)) {
      return;
    }
    if ((*found)[1].elements.empty()) {
      sweep_rank_.store(0); // past the end: the next turn starts again
    }
    std::set<std::string> keys;
    for (const RedisReply& reply : *found) {
      for (const RedisReply& k : reply.elements) {
        keys.insert(k.str);
      }
    }
    const std::vector<std::string> asked(keys.begin(), keys.end());
    for (std::size_t first = 0; first < asked.size(); first += kMaxRound) {
      (void)rows(area, std::span(asked).subspan(first, std::min(kMaxRound, asked.size() - first)));
    }
  }
}

Result<bool> RedisOrderIndex::is_built() {
  // GET, not EXISTS: it counts as a use, so an LRU policy keeps the mark.
  auto built = client_.run(built_key(), {"GET", built_key()});
  if (!built) {
    return tl::unexpected(built.error());
  }
  return built->type == RedisReply::Type::kString;
}

Result<void> RedisOrderIndex::prepare() {
  (void)flush_reads(); // a lost batch only makes entries look less recently read
  auto built = is_built();
  if (!built || *built) {
    return built ? Result<void>{} : tl::unexpected(built.error());
  }
  // One build per process, and per namespace over every kcached (a claim
  // with an expiry): the others are told to come back.
  const std::lock_guard lock(build_mu_);
  built = is_built();
  if (!built || *built) {
    return built ? Result<void>{} : tl::unexpected(built.error());
  }
  const std::string claim = built_key() + ":building";
  auto claimed =
      client_.run(built_key(), {"SET", claim, "1", "NX", "PX", std::to_string(kBuildLockMs)});
  if (!claimed) {
    return tl::unexpected(claimed.error());
  }
  if (claimed->type != RedisReply::Type::kStatus) {
    return tl::unexpected(
        StoreError{StoreError::Code::kUnavailable,
                   "redis: another kcached is building the listing index of namespace '" + ns_ +
                       "'; listings work again when it is done"});
  }
  auto done = build();
  (void)client_.run(built_key(), {"DEL", claim});
  return done;
}

Result<void> RedisOrderIndex::build() {
  spdlog::info("redis: building the listing index of namespace '{}' from a SCAN of its keys", ns_);
  auto masters = client_.masters();
  if (!masters) {
    return tl::unexpected(masters.error());
  }
  const std::int64_t now = unix_now_ms();
  std::uint64_t indexed = 0;
  for (const Area area : kAreas) {
    const std::string prefix = redis_value_key(ns_, area, "");
    const std::string match = glob_escape(prefix) + "*";
    for (const std::string& master : *masters) {
      std::string cursor = "0";
      do {
        const RedisCommand scan{"SCAN", cursor, "MATCH", match, "COUNT", "1000"};
        auto page = client_.run_on(master, scan);
        if (!page) {
          return tl::unexpected(page.error());
        }
        if (page->type != RedisReply::Type::kArray || page->elements.size() != 2) {
          return tl::unexpected(redis_error("SCAN", *page));
        }
        cursor = page->elements[0].str;
        Routed meta;
        for (const RedisReply& k : page->elements[1].elements) {
          meta.emplace_back(k.str, RedisCommand{"EXISTS", k.str});
          meta.emplace_back(k.str, RedisCommand{"STRLEN", k.str});
          meta.emplace_back(k.str, RedisCommand{"OBJECT", "IDLETIME", k.str});
        }
        if (meta.empty()) {
          continue;
        }
        auto replies = client_.run_many(std::move(meta));
        if (!replies) {
          return tl::unexpected(replies.error());
        }
        // NX: what a put indexed meanwhile is newer than what the SCAN saw.
        RedisCommand keys{"ZADD", set_key(area, Set::kKey), "NX"};
        RedisCommand sizes{"ZADD", set_key(area, Set::kSize), "NX"};
        RedisCommand access{"ZADD", set_key(area, Set::kAccess), "NX"};
        RedisCommand stored{"ZADD", set_key(area, Set::kStored), "NX"}; // with a TTL only
        const auto& found = page->elements[1].elements;
        for (std::size_t i = 0; i < found.size(); ++i) {
          const RedisReply& exists = (*replies)[3 * i];
          if (exists.type != RedisReply::Type::kInteger || exists.integer != 1) {
            continue; // gone since the SCAN
          }
          const RedisReply& len = (*replies)[3 * i + 1];
          const RedisReply& idle = (*replies)[3 * i + 2]; // an error under an LFU policy
          const std::string member = found[i].str.substr(prefix.size());
          const std::int64_t read_ms =
              idle.type == RedisReply::Type::kInteger ? now - idle.integer * 1000 : now;
          keys.insert(keys.end(), {"0", member});
          sizes.insert(sizes.end(), {score(-len.integer), member});
          access.insert(access.end(), {score(-read_ms), member});
          stored.insert(stored.end(), {score(now), member}); // looked at once a TTL has passed
          ++indexed;
        }
        if (keys.size() > 3) {
          std::vector<RedisCommand> writes = {keys, sizes, access};
          if (ttl_) {
            writes.push_back(stored);
          }
          auto written = client_.pipeline(built_key(), std::move(writes));
          if (!written) {
            return tl::unexpected(written.error());
          }
          if (!all_ok(*written)) {
            return tl::unexpected(StoreError{StoreError::Code::kIo, "redis: index build refused"});
          }
        }
      } while (cursor != "0");
    }
  }
  auto marked = client_.run(built_key(), {"SET", built_key(), "1"});
  if (!marked) {
    return tl::unexpected(marked.error());
  }
  spdlog::info("redis: listing index of namespace '{}' built: {} entries", ns_, indexed);
  return {};
}

Result<RedisOrderIndex::Rows> RedisOrderIndex::rows(Area area, std::span<const std::string> keys) {
  Rows out;
  out.rows.resize(keys.size());
  if (keys.empty()) {
    return out;
  }
  // Per key one EXISTS on its value's node; sizes and read times from the
  // index's node, two commands for the lot (a reply per key is what costs).
  const std::size_t n = keys.size();
  Routed asked;
  asked.reserve(n + 2);
  RedisCommand sizes{"ZMSCORE", set_key(area, Set::kSize)};
  RedisCommand reads{"ZMSCORE", set_key(area, Set::kAccess)};
  for (const std::string& key : keys) {
    const std::string value = redis_value_key(ns_, area, key);
    asked.emplace_back(value, RedisCommand{"EXISTS", value});
    sizes.push_back(key);
    reads.push_back(key);
  }
  asked.emplace_back(built_key(), std::move(sizes));
  asked.emplace_back(built_key(), std::move(reads));
  auto replies = client_.run_many(std::move(asked));
  if (!replies) {
    return tl::unexpected(replies.error());
  }
  if (replies->size() != n + 2 || !all_ok(*replies) || (*replies)[n].elements.size() != n ||
      (*replies)[n + 1].elements.size() != n) {
    return tl::unexpected(StoreError{StoreError::Code::kIo, "redis: listing rows refused"});
  }
  std::vector<std::string> gone;
  Routed unsized; // held but not indexed (a writer from before the index)
  std::vector<std::size_t> unsized_at;
  for (std::size_t i = 0; i < n; ++i) {
    const RedisReply& exists = (*replies)[i];
    if (exists.type != RedisReply::Type::kInteger || exists.integer != 1) {
      gone.push_back(keys[i]);
      continue;
    }
    const RedisReply& size = (*replies)[n].elements[i];
    out.rows[i] =
        ObjectInfo{area,
                   keys[i],
                   static_cast<std::uint64_t>(std::max<std::int64_t>(-parse_score(size), 0)),
                   0,
                   -parse_score((*replies)[n + 1].elements[i]),
                   0};
    if (size.type != RedisReply::Type::kString) {
      const std::string value = redis_value_key(ns_, area, keys[i]);
      unsized.emplace_back(value, RedisCommand{"STRLEN", value});
      unsized_at.push_back(i);
    }
  }
  if (!unsized.empty()) {
    auto lengths = client_.run_many(std::move(unsized));
    if (!lengths || lengths->size() != unsized_at.size()) {
      return tl::unexpected(lengths ? StoreError{StoreError::Code::kIo, "redis STRLEN refused"}
                                    : lengths.error());
    }
    for (std::size_t j = 0; j < unsized_at.size(); ++j) {
      out.rows[unsized_at[j]]->size =
          static_cast<std::uint64_t>(std::max<long long>((*lengths)[j].integer, 0));
    }
  }
  out.gone = gone.size();
  // Best effort: a listing that meets them again drops them then.
  out.gone_dropped = drop_unless_stored(area, gone);
  return out;
}

Result<RedisOrderIndex::Round> RedisOrderIndex::round_of(Area area, RedisCommand range) {
  const std::string what = range.front();
  auto page = client_.run(built_key(), std::move(range));
  if (!page) {
    return tl::unexpected(page.error());
  }
  if (page->type != RedisReply::Type::kArray) {
    return tl::unexpected(redis_error(what, *page));
  }
  std::vector<std::string> keys;
  for (const RedisReply& k : page->elements) {
    keys.push_back(k.str);
  }
  auto described = rows(area, keys);
  if (!described) {
    return tl::unexpected(described.error());
  }
  return Round{std::move(*described), std::move(keys)};
}

Result<std::vector<ObjectInfo>> RedisOrderIndex::first_rows(Area area, Set set, std::size_t limit) {
  std::vector<ObjectInfo> out;
  std::set<std::string> seen; // ranks shift under concurrent writers: no row twice
  long rank = 0;              // NOLINT(google-runtime-int): Redis' rank type
  std::size_t boost = 1;      // grows while rounds come back mostly gone
  while (out.size() < limit) {
    const std::size_t round = std::min(kMaxRound, next_round(limit - out.size()) * boost);
    auto described = round_of(area, {"ZRANGE", set_key(area, set), std::to_string(rank),
                                     std::to_string(rank + static_cast<long>(round) - 1)});
    if (!described) {
      return tl::unexpected(described.error());
    }
    const std::vector<std::string>& keys = described->keys;
    long live = 0; // NOLINT(google-runtime-int)
    for (auto& row : described->rows) {
      live += row ? 1 : 0;
      if (row && out.size() < limit && seen.insert(row->key).second) {
        out.push_back(std::move(*row));
      }
    }
    if (keys.size() < round) {
      break; // the set is exhausted
    }
    // When the keys found gone were dropped from the set, the next page
    // starts right after the live ones.
    rank += described->gone_dropped ? live : static_cast<long>(keys.size());
    boost = next_boost(boost, described->gone, keys.size());
  }
  return out;
}

Result<std::vector<ObjectInfo>> RedisOrderIndex::key_range(Area area, std::string start,
                                                           const std::string& stop,
                                                           std::size_t limit) {
  std::vector<ObjectInfo> out;
  std::size_t boost = 1; // grows while rounds come back mostly gone
  while (out.size() < limit) {
    const std::size_t round = std::min(kMaxRound, next_round(limit - out.size()) * boost);
    auto described = round_of(area, {"ZRANGEBYLEX", set_key(area, Set::kKey), start, stop, "LIMIT",
                                     "0", std::to_string(round)});
    if (!described) {
      return tl::unexpected(described.error());
    }
    const std::vector<std::string>& keys = described->keys;
    for (auto& row : described->rows) {
      if (row && out.size() < limit) {
        out.push_back(std::move(*row));
      }
    }
    if (keys.size() < round) {
      break;
    }
    start = "(" + keys.back();
    boost = next_boost(boost, described->gone, keys.size());
  }
  return out;
}

Result<std::vector<ObjectInfo>> RedisOrderIndex::list(const ListOptions& options) {
  if (auto ready = prepare(); !ready) {
    return tl::unexpected(ready.error());
  }
  std::vector<ObjectInfo> out;
  for (const Area area : kAreas) {
    if ((options.area && *options.area != area) || (options.after && options.after->area > area) ||
        out.size() >= options.limit) {
      continue;
    }
    std::string start = options.prefix.empty() ? "-" : "[" + options.prefix;
    if (options.after && options.after->area == area && options.after->key >= options.prefix) {
      start = "(" + options.after->key;
    }
    const std::string stop = after_prefix_bound(options.prefix);
    auto rows = key_range(area, std::move(start), stop, options.limit - out.size());
    if (!rows) {
      return tl::unexpected(rows.error());
    }
    std::move(rows->begin(), rows->end(), std::back_inserter(out));
  }
  return out;
}

Result<TopList> RedisOrderIndex::list_top(const TopListOptions& options) {
  if (auto ready = prepare(); !ready) {
    return tl::unexpected(ready.error());
  }
  // Created and hits are not kept: every row has 0, so those orders are key order.
  const Set set = options.order == ListOrder::kSize         ? Set::kSize
                  : options.order == ListOrder::kLastAccess ? Set::kAccess
                                                            : Set::kKey;
  TopList top;
  top.entries_exact = false; // the sets may still hold keys whose values are gone
  for (const Area area : kAreas) {
    if (options.area && *options.area != area) {
      continue;
    }
    auto count = client_.run(built_key(), {"ZCARD", set_key(area, Set::kKey)});
    if (!count) {
      return tl::unexpected(count.error());
    }
    top.entries += static_cast<std::uint64_t>(std::max<long long>(count->integer, 0));
    auto rows = first_rows(area, set, options.limit);
    if (!rows) {
      return tl::unexpected(rows.error());
    }
    std::move(rows->begin(), rows->end(), std::back_inserter(top.rows));
  }
  // Each area came in its set's order; rows are sorted by their own values,
  // as a sorted listing is, then the areas merged.
  std::sort(top.rows.begin(), top.rows.end(), [&](const ObjectInfo& a, const ObjectInfo& b) {
    return comes_before(a, b, options.order);
  });
  if (top.rows.size() > options.limit) {
    top.rows.resize(options.limit);
  }
  return top;
}

Result<std::vector<std::optional<ObjectInfo>>>
RedisOrderIndex::describe(std::span<const ListCursor> entries) {
  (void)flush_reads();
  std::vector<std::optional<ObjectInfo>> out(entries.size());
  for (const Area area : kAreas) {
    std::vector<std::string> keys;
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].area == area) {
        keys.push_back(entries[i].key);
        at.push_back(i);
      }
    }
    for (std::size_t first = 0; first < keys.size(); first += kMaxRound) {
      const std::size_t n = std::min(kMaxRound, keys.size() - first);
      auto described = rows(area, std::span(keys).subspan(first, n));
      if (!described) {
        return tl::unexpected(described.error());
      }
      for (std::size_t j = 0; j < n; ++j) {
        out[at[first + j]] = std::move(described->rows[j]);
      }
    }
  }
  return out;
}

} // namespace kcache::storage::detail
