// The inspection and maintenance routes of RequestHandler: entry listings,
// one entry, stats, and verify/gc (the walks themselves are storage's). The
// answers are rendered by protocol/admin.h, which the client reads them with.

#include "entry_pages.h"
#include "responses.h"
#include "scopes.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/protocol/admin.h>
#include <kcache/protocol/build_info.h>
#include <kcache/protocol/wire.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/request_handler.h>
#include <kcache/storage/maintenance.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace kcache::service {

namespace wire = protocol::wire;
using storage::Area;

namespace {

protocol::EntrySummary summary_of(const storage::ObjectInfo& info) {
  return {std::string(storage::area_name(info.area)),
          info.key,
          info.size,
          info.created_ms,
          info.last_access_ms,
          info.hits,
          std::nullopt};
}

protocol::Entry entry_of(const storage::ActionRecord& record) {
  protocol::Entry entry;
  entry.key = record.key;
  for (const storage::OutputRef& o : record.outputs) {
    entry.outputs.push_back({o.name, o.digest, o.size});
  }
  entry.producer = record.producer;
  entry.created_ms = record.created_ms;
  entry.metadata = record.metadata;
  if (record.manifest) {
    entry.manifest_json = cachekey::manifest_to_json(*record.manifest);
  }
  return entry;
}

// The counters counted since `zero` (POST /v1/stats/zero).
storage::CounterSnapshot since(const storage::CounterSnapshot& now,
                               const storage::CounterSnapshot& zero) {
  const auto minus = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; };
  return {minus(now.hits, zero.hits),
          minus(now.misses, zero.misses),
          minus(now.errors, zero.errors),
          minus(now.corrupt, zero.corrupt),
          minus(now.evictions, zero.evictions),
          minus(now.puts, zero.puts),
          minus(now.bytes_read, zero.bytes_read),
          minus(now.bytes_written, zero.bytes_written),
          minus(now.backfills, zero.backfills),
          minus(now.rejected, zero.rejected),
          minus(now.no_space, zero.no_space)};
}

// A record's namespace (key_namespace.h); a kc1- key's is in its stored
// manifest, peeked: listing is not using.
std::string namespace_of(storage::ArtifactStore& artifacts, std::string_view key) {
  const KeyScope scope = key_scope(key);
  if (scope.kind != KeyScope::Kind::kManifest) {
    return std::string(scope.ns);
  }
  auto record = artifacts.peek_record(key);
  if (!record || !record->has_value() || !(*record)->manifest) {
    return "";
  }
  return (*record)->manifest->ns;
}

// verify, gc and zeroing the stats act on every namespace.
std::optional<Response> needs_admin_everywhere(const Request& req, const Principal& who) {
  if (who.may_everywhere(Role::kAdmin)) {
    return std::nullopt;
  }
  return error(req, http::status::forbidden,
               "token '" + who.name + "' needs admin on \"*\" to " + std::string(req.target()));
}

// What makes two sorted listings one (sorted_windows.h): the order, the
// filters and the reader (its token's name and grants decide what it sees).
// Each part is length-prefixed: the prefix and namespace come from the
// query, so no choice of them may spell another reader's listing.
std::string listing_id(EntrySort sort, const storage::ListOptions& options, const std::string& ns,
                       const Principal& who) {
  std::string id;
  const auto part = [&id](std::string_view text) {
    id += std::to_string(text.size());
    id += ':';
    id += text;
  };
  part(std::to_string(static_cast<int>(sort)));
  part(options.area ? storage::area_name(*options.area) : "*");
  part(options.prefix);
  part(ns);
  part(who.name);
  for (const RoleGrant& grant : who.roles) {
    part(grant.pattern);
    part(role_name(grant.role));
  }
  return id;
}

} // namespace

// The outputs of the record under `key`, read without touching it (a listing
// must not make what it shows look used); nullopt when it cannot be read.
std::optional<std::uint64_t> RequestHandler::artifact_size(std::string_view key) {
  auto record = artifacts_.peek_record(key);
  if (!record || !record->has_value()) {
    return std::nullopt;
  }
  std::uint64_t total = 0;
  for (const storage::OutputRef& o : (*record)->outputs) {
    total += o.size;
  }
  return total;
}

Response RequestHandler::entries(const Request& req, const RouteArgs& args) {
  const Query& query = args.query;
  storage::ListOptions options;
  const std::string area = query.get("area");
  if (area == "ac") {
    options.area = Area::kAction;
  } else if (area == "cas") {
    options.area = Area::kCas;
  } else if (!area.empty()) {
    return error(req, http::status::bad_request, "area must be ac or cas");
  }
  options.prefix = query.get("prefix");
  // As GET would serve them: a shared-tier record refused for its signature
  // is not listed (storage/signature_checking_store.h says why).
  options.servable_only = true;
  const auto count = [&](const char* name, std::size_t fallback) -> std::optional<std::size_t> {
    const std::string text = query.get(name);
    std::size_t n = fallback;
    if (!text.empty()) {
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
      if (ec != std::errc() || ptr != text.data() + text.size()) {
        return std::nullopt;
      }
    }
    return n;
  };
  const auto limit = count("limit", 1000);
  const auto offset = count("offset", 0); // ?offset= pages through a sorted listing
  if (!limit || !offset) {
    return error(req, http::status::bad_request, "limit and offset must be non-negative integers");
  }
  const std::optional<EntrySort> sort = parse_entry_sort(query.get("sort", "last_access"));
  if (!sort) {
    return error(req, http::status::bad_request,
                 "sort must be size, last_access, hits, created or key");
  }
  // Only what this token may read: action records of its namespaces (CAS
  // blobs are content-addressed: any reader may see them); with
  // ?namespace=, the action records of that namespace only.
  const bool everywhere = args.who.may_everywhere(Role::kRead);
  const std::string ns = query.get("namespace");
  const EntryFilter keep = [&](const storage::ObjectInfo& info) {
    if (!everywhere && info.area == Area::kAction &&
        !may_read_key(args.who, artifacts_, info.key)) {
      return false;
    }
    return ns.empty() || (info.area == Area::kAction && namespace_of(artifacts_, info.key) == ns);
  };
  const auto with_sizes = [&](std::vector<storage::ObjectInfo>& rows) {
    protocol::EntryList out;
    for (const storage::ObjectInfo& info : rows) {
      out.entries.push_back(summary_of(info));
      if (info.area == Area::kAction) {
        out.entries.back().artifact_size = artifact_size(info.key);
      }
    }
    return out;
  };
  const std::size_t page_limit = std::min(*limit, kMaxEntriesPage);
  if (query.params.contains("after")) {
    // A page in key order after a cursor ("" for the first): its cost is
    // the page's (and at most kMaxEntriesExamined entries filters drop),
    // not the store's. No total: that would read everything.
    if (*sort != EntrySort::kKey || *offset != 0) {
      return error(req, http::status::bad_request,
                   "after= pages in key order: give sort=key and no offset");
    }
    const std::string after = query.get("after");
    if (!after.empty()) {
      const auto colon = after.find(':');
      const std::string_view cursor_area = std::string_view(after).substr(0, colon);
      if (colon == std::string::npos || (cursor_area != "ac" && cursor_area != "cas")) {
        return error(req, http::status::bad_request,
                     "after must be empty, ac:KEY or cas:KEY (a page's next_after)");
      }
      options.after = storage::ListCursor{cursor_area == "ac" ? Area::kAction : Area::kCas,
                                          after.substr(colon + 1)};
    }
    auto page = key_page(store_, options, page_limit, keep, kMaxEntriesExamined, ns);
    if (!page) {
      return store_error(req, page.error());
    }
    nlohmann::json body = protocol::to_json(with_sizes(page->rows));
    body.erase("total");
    body["next_after"] = page->next
                             ? nlohmann::json(std::string(storage::area_name(page->next->area)) +
                                              ":" + page->next->key)
                             : nlohmann::json(nullptr);
    body["examined"] = page->examined;
    return json_response(req, http::status::ok, body);
  }
  // Sorted pages read every entry (no tier keeps sizes or times in order)
  // and hold offset + limit of them: that window is bounded.
  if (*offset > kMaxEntriesPage - page_limit) { // (offset + limit, without overflow)
    return error(req, http::status::bad_request,
                 "offset + limit may be at most " + std::to_string(kMaxEntriesPage) +
                     " in a sorted listing: narrow it with prefix= or namespace=, or page in "
                     "key order with after=");
  }
  // A later page of a listing whose first page was just read is cut from
  // the window that page kept (sorted_windows.h); a first page reads afresh
  // and keeps the whole window for the pages after it.
  const std::string listing = listing_id(*sort, options, ns, args.who);
  if (*offset > 0) {
    if (const auto window = sorted_windows_.find(listing);
        window && window->covers(*offset, page_limit)) {
      const auto first = std::min(*offset, window->rows.size());
      const auto last = std::min(first + page_limit, window->rows.size());
      std::vector<storage::ObjectInfo> rows(
          window->rows.begin() + static_cast<std::ptrdiff_t>(first),
          window->rows.begin() + static_cast<std::ptrdiff_t>(last));
      protocol::EntryList out = with_sizes(rows);
      out.total = window->total;
      out.total_estimated = window->total_estimated;
      return json_response(req, http::status::ok, protocol::to_json(out));
    }
  }
  const bool first_page = *offset == 0;
  // A first page keeps the window for the pages after it: the whole bound
  // when every entry is read for it, a shorter one from an order index
  // (read again for a page past it, at the cost of offset + limit rows).
  SortedQuery sorted{*sort,
                     *offset,
                     first_page ? kMaxEntriesPage : page_limit,
                     first_page ? std::max(page_limit, kIndexedWindow) : page_limit,
                     everywhere && ns.empty(),
                     ns};
  auto page = sorted_page(store_, options, sorted, keep);
  if (!page) {
    return store_error(req, page.error());
  }
  if (first_page) {
    auto window = std::make_shared<SortedWindows::Window>();
    window->rows = std::move(page->rows);
    window->total = page->total;
    window->total_estimated = page->total_estimated;
    page->rows.assign(window->rows.begin(),
                      window->rows.begin() +
                          static_cast<std::ptrdiff_t>(std::min(page_limit, window->rows.size())));
    sorted_windows_.keep(listing, std::move(window));
  }
  protocol::EntryList out = with_sizes(page->rows);
  out.total = page->total;
  out.total_estimated = page->total_estimated;
  return json_response(req, http::status::ok, protocol::to_json(out));
}

Response RequestHandler::entry(const Request& req, const RouteArgs& args) {
  const std::string_view key = args.param;
  if (!wire::is_valid_action_key(key)) {
    return error(req, http::status::bad_request, "invalid action key");
  }
  if (!may_read_key(args.who, artifacts_, key)) {
    return error(req, http::status::not_found, "no action record for " + std::string(key));
  }
  // Looking is not using: no access time or hit for it.
  auto record = artifacts_.peek_record(key);
  if (!record) {
    return store_error(req, record.error());
  }
  if (!record->has_value()) {
    return error(req, http::status::not_found, "no action record for " + std::string(key));
  }
  protocol::Entry entry = entry_of(**record);
  storage::ListOptions options;
  options.area = Area::kAction;
  options.prefix = std::string(key);
  options.limit = 1; // in key order, the key itself comes before the longer keys it prefixes
  if (auto listed = store_.list(options)) {
    for (const storage::ObjectInfo& info : *listed) {
      if (info.key == key) {
        entry.storage = summary_of(info);
        std::uint64_t total = 0;
        for (const protocol::EntryOutput& o : entry.outputs) {
          total += o.size;
        }
        entry.storage->artifact_size = total;
      }
    }
  }
  auto doc = protocol::to_json(entry);
  if (!doc) {
    return error(req, http::status::internal_server_error, doc.error());
  }
  return json_response(req, http::status::ok, *doc);
}

Response RequestHandler::stats(const Request& req, const RouteArgs& /*args*/) {
  StatsZero zero;
  {
    std::lock_guard lock(zero_mu_);
    zero = zero_;
  }
  protocol::Stats stats;
  for (std::size_t i = 0; i < tiers_.size(); ++i) {
    const storage::CounterSnapshot c =
        since(tiers_[i].store->counters(),
              i < zero.tiers.size() ? zero.tiers[i] : storage::CounterSnapshot{});
    const storage::StoreUsage usage = tiers_[i].store->usage();
    stats.tiers.push_back({tiers_[i].name, c.hits, c.misses, c.errors, c.corrupt, c.evictions,
                           c.puts, c.bytes_read, c.bytes_written, c.backfills, c.rejected,
                           usage.bytes, usage.capacity, usage.entries});
  }
  const storage::CounterSnapshot total = since(store_.counters(), zero.total);
  stats.uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  stats.hits = total.hits;
  stats.misses = total.misses;
  stats.errors = total.errors;
  if (total.hits + total.misses > 0) {
    stats.hit_ratio =
        static_cast<double>(total.hits) / static_cast<double>(total.hits + total.misses);
  }
  stats.zeroed_ms = zero.zeroed_ms;
  const protocol::BuildInfo build = protocol::build_info();
  stats.version = build.version;
  stats.git_revision = build.git_revision;
  stats.key_schema = build.key_schema;
  stats.c_abi = build.c_abi;
  stats.cluster = nodes_ != nullptr;
  return json_response(req, http::status::ok, protocol::to_json(stats));
}

Response RequestHandler::zero_stats(const Request& req, const RouteArgs& args) {
  if (auto refused = needs_admin_everywhere(req, args.who)) {
    return std::move(*refused);
  }
  StatsZero zero;
  zero.zeroed_ms = storage::unix_now_ms();
  zero.total = store_.counters();
  for (const TierView& tier : tiers_) {
    zero.tiers.push_back(tier.store->counters());
  }
  {
    std::lock_guard lock(zero_mu_);
    zero_ = std::move(zero);
  }
  spdlog::info("stats zeroed by token '{}'", args.who.name);
  return stats(req, args);
}

Response RequestHandler::verify(const Request& req, const RouteArgs& args) {
  if (auto refused = needs_admin_everywhere(req, args.who)) {
    return std::move(*refused);
  }
  const std::string area = args.query.get("area");
  if (area != "ac" && area != "cas") {
    return error(req, http::status::bad_request, "area must be ac or cas");
  }
  storage::VerifyOptions options;
  options.area = area == "ac" ? Area::kAction : Area::kCas;
  options.prefix = args.query.get("prefix");
  options.repair = args.query.get("repair") == "1" || args.query.get("repair") == "true";
  auto report = storage::verify_entries(store_, options);
  if (!report) {
    return store_error(req, report.error());
  }
  protocol::VerifyReport out{area, report->checked, {}, report->repaired};
  for (const storage::VerifyProblem& p : report->problems) {
    out.problems.push_back({p.key, p.problem});
  }
  return json_response(req, http::status::ok, protocol::to_json(out));
}

Response RequestHandler::gc(const Request& req, const RouteArgs& args) {
  if (auto refused = needs_admin_everywhere(req, args.who)) {
    return std::move(*refused);
  }
  // max_size=BYTES (LRU down to a size) and/or older_than_s=SECONDS (entries
  // not accessed for that long); with both, the age goes first.
  const auto number = [&](const char* name) -> std::optional<std::optional<std::uint64_t>> {
    const std::string text = args.query.get(name);
    if (text.empty()) {
      return std::optional<std::uint64_t>{};
    }
    std::uint64_t n = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      return std::nullopt;
    }
    return n;
  };
  const auto max_size = number("max_size");
  const auto older_than_s = number("older_than_s");
  if (!max_size || !older_than_s || (!*max_size && !*older_than_s)) {
    return error(req, http::status::bad_request,
                 "give max_size (a number of bytes) and/or older_than_s (a number of seconds)");
  }
  storage::GcReport total;
  bool first = true;
  const auto add = [&](const storage::GcReport& r) {
    total.before_bytes = first ? r.before_bytes : total.before_bytes;
    total.after_bytes = r.after_bytes;
    total.removed_entries += r.removed_entries;
    total.removed_bytes += r.removed_bytes;
    first = false;
  };
  if (*older_than_s) {
    // Seconds beyond what milliseconds hold mean "older than anything".
    const std::uint64_t s = std::min<std::uint64_t>(**older_than_s, 1ULL << 40);
    auto report = storage::collect_older_than(
        store_, {.older_than = std::chrono::seconds(static_cast<std::int64_t>(s))});
    if (!report) {
      return store_error(req, report.error());
    }
    add(*report);
  }
  if (*max_size) {
    auto report = storage::collect_garbage(store_, **max_size);
    if (!report) {
      return store_error(req, report.error());
    }
    add(*report);
  }
  return json_response(
      req, http::status::ok,
      protocol::to_json(protocol::GcReport{total.before_bytes, total.after_bytes,
                                           total.removed_entries, total.removed_bytes}));
}

} // namespace kcache::service
