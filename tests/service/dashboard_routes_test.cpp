// The dashboard's server side without sockets: pages of GET /v1/entries over
// a cursor in bounded reads (entry_pages.h), GET /v1/explain and GET /v1/whoami.

#include "entry_pages.h"
#include "listing_reader.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/service/key_namespace.h>
#include <kcache/service/request_handler.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/memory_store.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <tuple>

namespace kcache::service {
namespace {

using nlohmann::json;
using storage::Area;
using storage::ListCursor;
using storage::ObjectInfo;

std::string key_of(int i) {
  char name[16];
  std::snprintf(name, sizeof name, "k%03d", i);
  return name;
}

std::vector<std::string> keys(const std::vector<ObjectInfo>& rows) {
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const ObjectInfo& info : rows) {
    out.push_back(info.key);
  }
  return out;
}

class EntryPages : public ::testing::Test {
protected:
  void SetUp() override {
    for (int i = 0; i < 300; ++i) {
      // Sizes repeat: ties are ordered by key.
      ASSERT_TRUE(store_.put(Area::kAction, key_of(i), std::string((i * 37) % 101 + 1, 'x')));
    }
    ASSERT_TRUE(store_.put(Area::kCas, "blob", "b"));
    options_.area = Area::kAction;
  }

  storage::MemoryStore store_{64 << 20};
  storage::ListOptions options_;
  const EntryFilter all_ = [](const ObjectInfo&) { return true; };
};

TEST_F(EntryPages, KeyPagesFollowTheCursorReadingAboutAPageEach) {
  std::vector<std::string> seen;
  std::optional<ListCursor> after;
  int pages = 0;
  do {
    options_.after = after;
    auto page = key_page(store_, options_, 50, all_, 100000);
    ASSERT_TRUE(page.has_value()) << page.error().message;
    EXPECT_LE(page->examined, 128U) << "a chunk, not the store";
    const auto rows = keys(page->rows);
    seen.insert(seen.end(), rows.begin(), rows.end());
    after = page->next;
    ++pages;
  } while (after && pages < 20);
  std::vector<std::string> expected;
  expected.reserve(300);
  for (int i = 0; i < 300; ++i) {
    expected.push_back(key_of(i));
  }
  EXPECT_EQ(pages, 6);
  EXPECT_EQ(seen, expected);
}

TEST_F(EntryPages, FiltersAndTheBoundOnEntriesExamined) {
  const EntryFilter sevens = [](const ObjectInfo& info) { return info.key.back() == '7'; };
  auto page = key_page(store_, options_, 10, sevens, 100000);
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->rows.size(), 10U);
  EXPECT_EQ(page->rows.front().key, "k007");
  EXPECT_EQ(page->rows.back().key, "k097");
  ASSERT_TRUE(page->next.has_value());
  EXPECT_EQ(page->next->key, "k097");
  // Stopped after 50 entries: what it found, and where the next page goes on.
  auto bounded = key_page(store_, options_, 10, sevens, 50);
  ASSERT_TRUE(bounded.has_value());
  EXPECT_EQ(keys(bounded->rows),
            (std::vector<std::string>{"k007", "k017", "k027", "k037", "k047"}));
  EXPECT_EQ(bounded->examined, 50U);
  ASSERT_TRUE(bounded->next.has_value());
  EXPECT_EQ(bounded->next->key, "k049");
  options_.after = bounded->next;
  auto rest = key_page(store_, options_, 10, sevens, 50);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->rows.front().key, "k057");
}

TEST_F(EntryPages, SortedPagesAreWindowsOfTheWholeSortedListing) {
  auto whole = sorted_page(store_, options_, {EntrySort::kSize, 0, 300, SIZE_MAX, false, {}}, all_);
  ASSERT_TRUE(whole.has_value()) << whole.error().message;
  EXPECT_EQ(whole->total, 300U);
  ASSERT_EQ(whole->rows.size(), 300U);
  EXPECT_TRUE(std::is_sorted(whole->rows.begin(), whole->rows.end(),
                             [](const ObjectInfo& a, const ObjectInfo& b) {
                               return std::make_tuple(-static_cast<std::int64_t>(a.size), a.key) <
                                      std::make_tuple(-static_cast<std::int64_t>(b.size), b.key);
                             }));
  auto page = sorted_page(store_, options_, {EntrySort::kSize, 120, 50, SIZE_MAX, false, {}}, all_);
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->total, 300U);
  EXPECT_EQ(keys(page->rows), keys({whole->rows.begin() + 120, whole->rows.begin() + 170}));
  const EntryFilter odd = [](const ObjectInfo& info) { return (info.key.back() - '0') % 2 == 1; };
  auto filtered =
      sorted_page(store_, options_, {EntrySort::kKey, 140, 50, SIZE_MAX, false, {}}, odd);
  ASSERT_TRUE(filtered.has_value());
  EXPECT_EQ(filtered->total, 150U);
  EXPECT_EQ(keys(filtered->rows),
            (std::vector<std::string>{"k281", "k283", "k285", "k287", "k289", "k291", "k293",
                                      "k295", "k297", "k299"}));
}

// Unfiltered, a sorted page comes from the store's order index
// (Store::list_top), not a read of every entry, and shows what reading
// every entry would: the same rows, the same total.
TEST_F(EntryPages, UnfilteredSortedPagesComeFromTheOrderIndexAsTheFullReadWould) {
  for (int i = 0; i < 300; i += 7) {
    for (int r = 0; r < i % 4; ++r) {
      ASSERT_TRUE(store_.get(Area::kAction, key_of(i)));
    }
  }
  // Both areas (301 entries), then the action records only (300): an area
  // is read from the index too.
  for (const auto& [area, entries] :
       {std::pair<std::optional<Area>, std::uint64_t>{std::nullopt, 301},
        std::pair<std::optional<Area>, std::uint64_t>{Area::kAction, 300}}) {
    options_.area = area;
    for (const EntrySort sort :
         {EntrySort::kSize, EntrySort::kHits, EntrySort::kCreated, EntrySort::kLastAccess}) {
      for (const std::size_t offset : {0, 120, 290}) {
        auto indexed = sorted_page(store_, options_, {sort, offset, 50, SIZE_MAX, true, {}}, all_);
        auto read_all =
            sorted_page(store_, options_, {sort, offset, 50, SIZE_MAX, false, {}}, all_);
        ASSERT_TRUE(indexed.has_value()) << indexed.error().message;
        ASSERT_TRUE(read_all.has_value()) << read_all.error().message;
        EXPECT_TRUE(indexed->indexed);
        EXPECT_FALSE(read_all->indexed);
        EXPECT_EQ(keys(indexed->rows), keys(read_all->rows))
            << "sort " << static_cast<int>(sort) << ", offset " << offset;
        EXPECT_EQ(indexed->total, entries);
        EXPECT_EQ(read_all->total, entries);
        EXPECT_FALSE(indexed->total_estimated);
      }
    }
  }
  // A prefix is a filter the index cannot apply: every entry is read.
  options_.prefix = "k1";
  auto prefixed =
      sorted_page(store_, options_, {EntrySort::kSize, 0, 50, SIZE_MAX, true, {}}, all_);
  ASSERT_TRUE(prefixed.has_value());
  EXPECT_FALSE(prefixed->indexed);
  EXPECT_EQ(prefixed->total, 100U);
}

// Whether a namespace's listing must show `key`: a record of that namespace,
// or a manifest (its namespace is in the record: the caller's filter reads it).
bool may_be_in(const std::string& key, const std::string& ns) {
  return key.starts_with("kc1-") || key_scope(key).ns == ns;
}

// Everything a ListingReader for `ns` returns after `after`, chunk by chunk.
std::vector<std::string> read_namespace(storage::Store& store, const std::string& ns,
                                        std::optional<ListCursor> after, std::size_t chunk,
                                        std::size_t* seeks = nullptr) {
  storage::ListOptions options;
  options.after = std::move(after);
  ListingReader reader(store, options, chunk, ns);
  std::vector<std::string> out;
  for (int guard = 0; guard < 100000; ++guard) {
    auto got = reader.next();
    EXPECT_TRUE(got.has_value()) << got.error().message;
    if (!got || got->empty()) {
      break;
    }
    for (const ObjectInfo& info : *got) {
      out.push_back(info.key);
    }
  }
  if (seeks != nullptr) {
    *seeks = reader.seeks();
  }
  return out;
}

// The reader skips other namespaces by seeks, and misses none of its own:
// over keys of random shapes (kinds, manifests, compile keys, keys without a
// kind, bytes that sort around ':'), its rows that may be in the namespace
// are exactly those of a full read, from any cursor.
TEST(ListingReader, ReadsOnlyWhereANamespaceCanBeAndMissesNothingOfIt) {
  std::mt19937 random(7);
  const std::string alphabet = "abc:-._+=A09";
  const std::vector<std::string> namespaces = {"team-a", "team-b", "t", "team-a.x"};
  storage::MemoryStore store(64 << 20);
  std::vector<std::string> all;
  for (int i = 0; i < 3000; ++i) {
    std::string key;
    switch (random() % 6) {
    case 0:
      key = "kc1-" + std::to_string(random());
      break;
    case 1:
      key = "kcc-" + std::to_string(random());
      break;
    default: {
      // A kind, a namespace, the rest; or random bytes of the alphabet.
      if (random() % 3 != 0) {
        static const char* kinds[] = {"torch", "triton", "cuda", "t", "tor", "x-y"};
        key = std::string(kinds[random() % 6]) + ":" + namespaces[random() % namespaces.size()] +
              ":" + std::to_string(random() % 1000);
      } else {
        for (std::size_t n = 1 + random() % 12; n > 0; --n) {
          key.push_back(alphabet[random() % alphabet.size()]);
        }
      }
    }
    }
    ASSERT_TRUE(store.put(Area::kAction, key, "v"));
  }
  ASSERT_TRUE(store.put(Area::kCas, "blob", "b"));
  auto listed = store.list({});
  ASSERT_TRUE(listed.has_value());
  for (const ObjectInfo& info : *listed) {
    if (info.area == Area::kAction) {
      all.push_back(info.key);
    }
  }
  for (const std::string& ns : namespaces) {
    std::vector<std::string> want;
    std::copy_if(all.begin(), all.end(), std::back_inserter(want),
                 [&](const std::string& key) { return may_be_in(key, ns); });
    for (const std::size_t chunk : {1, 7, 128}) {
      std::size_t seeks = 0;
      std::vector<std::string> got = read_namespace(store, ns, std::nullopt, chunk, &seeks);
      std::vector<std::string> relevant;
      std::copy_if(got.begin(), got.end(), std::back_inserter(relevant),
                   [&](const std::string& key) { return may_be_in(key, ns); });
      EXPECT_EQ(relevant, want) << ns << ", chunk " << chunk;
      EXPECT_LT(got.size(), all.size()) << "other namespaces were read";
      EXPECT_LE(seeks, ListingReader::kMaxSeeks);
    }
    // From a cursor in the middle: the rest of it, as a full read has it.
    const std::string& middle = want[want.size() / 2];
    std::vector<std::string> rest =
        read_namespace(store, ns, ListCursor{Area::kAction, middle}, 16);
    std::vector<std::string> relevant;
    std::copy_if(rest.begin(), rest.end(), std::back_inserter(relevant),
                 [&](const std::string& key) { return may_be_in(key, ns); });
    EXPECT_EQ(relevant, std::vector<std::string>(want.begin() + want.size() / 2 + 1, want.end()))
        << ns;
  }
}

TEST(ListingReader, ANamespaceOfFewEntriesCostsThemAndASeekPerKind) {
  storage::MemoryStore store(64 << 20);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(store.put(Area::kAction, "torch:big:" + std::to_string(i), "v"));
    ASSERT_TRUE(store.put(Area::kAction, "triton:big:" + std::to_string(i), "v"));
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store.put(Area::kAction, "torch:small:" + std::to_string(i), "v"));
    ASSERT_TRUE(store.put(Area::kAction, "triton:small:" + std::to_string(i), "v"));
  }
  std::size_t seeks = 0;
  const auto got = read_namespace(store, "small", std::nullopt, 128, &seeks);
  EXPECT_EQ(got.size(), 10U);
  EXPECT_LE(seeks, 3U) << "a seek per kind and one past the last";
  // Through the page: the same, reading ten entries.
  const EntryFilter all = [](const ObjectInfo&) { return true; };
  storage::ListOptions options;
  auto page = key_page(store, options, 50, all, 100000, "small");
  ASSERT_TRUE(page.has_value());
  EXPECT_EQ(page->rows.size(), 10U);
  EXPECT_EQ(page->examined, 10U);
  auto sorted =
      sorted_page(store, options, {EntrySort::kSize, 0, 50, SIZE_MAX, false, "small"}, all);
  ASSERT_TRUE(sorted.has_value());
  EXPECT_EQ(sorted->total, 10U);
}

class DashboardRoutes : public ::testing::Test {
protected:
  json get(const std::string& target, http::status expect = http::status::ok) {
    Request req{http::verb::get, target, 11};
    req.prepare_payload();
    const Response res = handler_.handle(req);
    EXPECT_EQ(res.result(), expect) << target << ": " << res.body();
    return json::parse(res.body(), nullptr, false);
  }

  storage::MemoryStore store_{64 << 20};
  MetricsRegistry metrics_;
  RequestHandler handler_{store_, {{"memory", &store_}}, metrics_, {}};
};

TEST_F(DashboardRoutes, EntriesInKeyOrderPageByCursorWithoutATotal) {
  for (int i = 0; i < 120; ++i) {
    ASSERT_TRUE(store_.put(Area::kAction, key_of(i), "v"));
  }
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 5; ++page) {
    const json list = get("/v1/entries?area=ac&sort=key&limit=50&after=" + after);
    EXPECT_FALSE(list.contains("total"));
    for (const json& e : list["entries"]) {
      seen.push_back(e["key"]);
    }
    if (list["next_after"].is_null()) {
      break;
    }
    after = list["next_after"].get<std::string>();
    EXPECT_EQ(after, "ac:" + seen.back());
  }
  ASSERT_EQ(seen.size(), 120U);
  EXPECT_EQ(seen.back(), "k119");
  get("/v1/entries?sort=key&after=k001", http::status::bad_request);
  get("/v1/entries?sort=size&after=", http::status::bad_request);
  // A sorted listing holds offset + limit entries: that is bounded.
  get("/v1/entries?sort=size&offset=9990&limit=50", http::status::bad_request);
  EXPECT_EQ(get("/v1/entries?sort=size&offset=100&limit=50")["total"], 120);
}

// The pages after a sorted listing's first are cut from the window the first
// page kept: they do not shift when entries change meanwhile, and a first
// page reads afresh.
TEST_F(DashboardRoutes, LaterSortedPagesComeFromTheFirstPagesWindow) {
  for (int i = 0; i < 120; ++i) {
    ASSERT_TRUE(store_.put(Area::kAction, key_of(i), std::string(1000 + i, 'v')));
  }
  const auto keys_of = [](const json& list) {
    std::vector<std::string> out;
    for (const json& e : list["entries"]) {
      out.push_back(e["key"]);
    }
    return out;
  };
  const json first = get("/v1/entries?area=ac&sort=size&limit=50");
  EXPECT_EQ(first["total"], 120);
  ASSERT_EQ(keys_of(first).front(), "k119");
  // Larger than any: a fresh listing would put it first and shift every row.
  ASSERT_TRUE(store_.put(Area::kAction, "k999", std::string(5000, 'v')));
  const json second = get("/v1/entries?area=ac&sort=size&limit=50&offset=50");
  EXPECT_EQ(second["total"], 120) << "the window's count";
  const std::vector<std::string> second_keys = keys_of(second);
  ASSERT_EQ(second_keys.size(), 50U);
  EXPECT_EQ(second_keys.front(), "k069");
  const json third = get("/v1/entries?area=ac&sort=size&limit=50&offset=100");
  EXPECT_EQ(keys_of(third).size(), 20U);
  // Another listing (another order, another filter) is not that window.
  EXPECT_EQ(get("/v1/entries?area=ac&sort=key&offset=50&limit=50")["total"], 121);
  // A first page reads afresh and keeps a new window.
  const json again = get("/v1/entries?area=ac&sort=size&limit=50");
  EXPECT_EQ(again["total"], 121);
  EXPECT_EQ(keys_of(again).front(), "k999");
  EXPECT_EQ(keys_of(get("/v1/entries?area=ac&sort=size&limit=50&offset=50")).front(), "k070");
}

TEST_F(DashboardRoutes, ExplainPutsComponentsSideBySideAndMarksTheDifferingOne) {
  const auto manifest = [](const std::string& option) {
    return *cachekey::KeyBuilder()
                .ns("team")
                .graph_digest(std::string(64, 'd'))
                .hardware("x86_64:avx2")
                .options({"-O2", option})
                .build();
  };
  const cachekey::KeyManifest a = manifest("-DTILE=64");
  const cachekey::KeyManifest b = manifest("-DTILE=128");
  storage::ArtifactStore artifacts(store_);
  for (const auto& m : {a, b}) {
    ASSERT_TRUE(artifacts.put(m, {{"kernel.o", "object"}}, "test"));
  }
  ASSERT_TRUE(artifacts.put("torch:team:plain", {{"v", "x"}}, "test"));
  const json e = get("/v1/explain?a=" + a.key() + "&b=" + b.key());
  EXPECT_EQ(e["kind"], "manifest");
  EXPECT_FALSE(e["same"].get<bool>());
  std::vector<std::string> differing;
  for (const json& c : e["components"]) {
    if (c["differs"].get<bool>()) {
      differing.push_back(c["component"]);
      EXPECT_NE(c["a"], c["b"]);
    }
  }
  EXPECT_EQ(differing, std::vector<std::string>{"options"});
  EXPECT_EQ(e["components"].size(), 8U);
  ASSERT_EQ(e["diffs"].size(), 1U);
  EXPECT_EQ(e["diffs"][0]["component"], "options");
  EXPECT_TRUE(get("/v1/explain?a=" + a.key() + "&b=" + a.key())["same"].get<bool>());
  get("/v1/explain?a=" + a.key() + "&b=kc1-" + std::string(64, '0'), http::status::not_found);
  get("/v1/explain?a=" + a.key(), http::status::bad_request);
  get("/v1/explain?a=" + a.key() + "&b=torch:team:plain", http::status::unprocessable_entity);
}

TEST_F(DashboardRoutes, WhoamiWithoutTokensMayDoEverything) {
  const json who = get("/v1/whoami");
  EXPECT_EQ(who["name"], "anonymous");
  EXPECT_FALSE(who["tokens"].get<bool>());
  EXPECT_TRUE(who["everywhere"]["admin"].get<bool>());
  EXPECT_TRUE(who["somewhere"]["submit"].get<bool>());
}

} // namespace
} // namespace kcache::service
