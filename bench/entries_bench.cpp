// entries_bench: how long a page of GET /v1/entries (the dashboard's Entries
// page, `kcache ls`) takes over a store of 1,000,000 action records, in the
// store stack kcached runs by default (memory 256 MiB over RocksDB), through
// RequestHandler (no sockets). The anchor, in the same run: listing the
// whole store at once (Store::list without a limit), which is what every
// page cost before the listing was read in chunks after a cursor.
//
//   build/release/bench/entries_bench [--entries N] [--runs R] [--dir PATH]
//                                     [--redis URL] [--no-fill] [--query TARGET]...
//
// --no-fill times a store filled by an earlier run with the same --dir (its
// memory tier starts empty); --query times more targets after the usual ones.
// --redis URL adds the shared tier as kcached --redis-url does (cluster mode);
// with --no-fill and a new --dir, the page is a fresh node's over a Redis
// that holds everything.
//
// Keys: torch:ns<i % 10>:pt2:fx-graph::<i> (a tenth per namespace), each
// record naming one shared 1 KiB blob. Prints the median and the slowest of
// R runs per query, in ms, and the process's peak RSS after each part.

#include "temp_dir.h"

#include <kcache/service/request_handler.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/store_factory.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace kcache;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

long peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

std::string key_of(std::size_t i) {
  char key[64];
  std::snprintf(key, sizeof key, "torch:ns%zu:pt2:fx-graph::%08zu", i % 10, i);
  return key;
}

struct Timing {
  double median = 0, worst = 0;
  std::vector<double> runs; // in the order they ran
  std::size_t rows = 0;
  std::string note;
};

// `target` through the handler `runs` times: 200 expected.
Timing time_query(service::RequestHandler& handler, const std::string& target, int runs) {
  std::vector<double> ms;
  Timing t;
  for (int r = 0; r < runs; ++r) {
    service::Request req{service::http::verb::get, target, 11};
    req.prepare_payload();
    const auto start = Clock::now();
    const service::Response res = handler.handle(req);
    ms.push_back(ms_since(start));
    if (res.result() != service::http::status::ok) {
      std::fprintf(stderr, "%s: %u %s\n", target.c_str(), res.result_int(), res.body().c_str());
      std::exit(1);
    }
    const auto doc = nlohmann::json::parse(res.body());
    t.rows = doc["entries"].size();
    t.note = doc.contains("total") ? "total " + std::to_string(doc["total"].get<std::uint64_t>()) +
                                         (doc.value("total_estimated", false) ? " (estimated)" : "")
                                   : "examined " + std::to_string(doc.value("examined", 0));
  }
  t.runs = ms;
  std::sort(ms.begin(), ms.end());
  t.median = ms[ms.size() / 2];
  t.worst = ms.back();
  return t;
}

} // namespace

int main(int argc, char** argv) {
  std::size_t entries = 1'000'000;
  int runs = 5;
  std::string dir_arg;
  std::string redis_url;
  bool fill = true;
  std::vector<std::string> extra; // --query TARGET: timed after the usual ones
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--entries") == 0 && i + 1 < argc) {
      entries = std::stoul(argv[++i]);
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir_arg = argv[++i];
    } else if (std::strcmp(argv[i], "--redis") == 0 && i + 1 < argc) {
      redis_url = argv[++i];
    } else if (std::strcmp(argv[i], "--no-fill") == 0) {
      fill = false;
    } else if (std::strcmp(argv[i], "--query") == 0 && i + 1 < argc) {
      extra.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: entries_bench [--entries N] [--runs R] [--dir PATH [--no-fill]] "
                           "[--redis URL] [--query T]...\n");
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::warn);
  kcache::testing::TempDir temp;
  const std::string dir = dir_arg.empty() ? temp.str() : dir_arg;
  // kcached's default stack (config.cpp store_urls): memory, then RocksDB.
  std::vector<std::string> urls = {"memory://?capacity=" + std::to_string(256ULL << 20),
                                   "rocksdb://" + dir + "?capacity=" + std::to_string(64ULL << 30)};
  if (!redis_url.empty()) {
    urls.push_back(redis_url);
  }
  auto stack = storage::make_tiered_store(urls);
  if (!stack) {
    std::fprintf(stderr, "store: %s\n", stack.error().message.c_str());
    return 1;
  }
  storage::Store& store = *stack->store;

  storage::ArtifactStore artifacts(store);
  const std::string blob(1024, 'k');
  const auto fill_start = Clock::now();
  for (std::size_t i = 0; fill && i < entries; ++i) {
    if (auto ok = artifacts.put(key_of(i), {{"kernel.so", blob}}, "entries_bench"); !ok) {
      std::fprintf(stderr, "put %zu: %s\n", i, ok.error().message.c_str());
      return 1;
    }
  }
  std::printf("%s %zu action records in %.1f s (peak RSS %ld MiB)\n",
              fill ? "filled" : "reopened, not filled:", entries, ms_since(fill_start) / 1000,
              peak_rss_mib());

  std::vector<service::TierView> views;
  for (storage::Store* tier : stack->tiers) {
    views.push_back({tier->name(), tier});
  }
  service::MetricsRegistry metrics;
  service::RequestHandler handler(store, views, metrics, {});
  const std::string middle = "ac:" + key_of(entries / 2);
  std::vector<std::pair<std::string, std::string>> queries = {
      {"first page, key order", "/v1/entries?area=ac&sort=key&limit=50&after="},
      {"a page in the middle, key order", "/v1/entries?area=ac&sort=key&limit=50&after=" + middle},
      {"prefix torch:ns3:, key order",
       "/v1/entries?area=ac&prefix=torch:ns3:&sort=key&limit=50&after="},
      {"namespace ns3, key order", "/v1/entries?area=ac&namespace=ns3&sort=key&limit=50&after="},
      // Unfiltered: from the order index (Store::list_top). A first page
      // reads the listing's 10,000-row window for the pages after it.
      {"by last access (order index)", "/v1/entries?sort=last_access&limit=50"},
      {"by size, offset 5000 (order index)", "/v1/entries?sort=size&limit=50&offset=5000"},
      {"by hits (order index)", "/v1/entries?sort=hits&limit=50"},
      // An area is read from the index too (kcache ls asks for area=ac).
      {"area=ac, by last access (index)", "/v1/entries?area=ac&sort=last_access&limit=50"},
      {"area=ac, by size, offset 5000 (index)",
       "/v1/entries?area=ac&sort=size&limit=50&offset=5000"},
      // A prefix or a namespace: that range is read whole (a heap keeps the page).
      {"prefix torch:ns3:, by last access",
       "/v1/entries?area=ac&prefix=torch:ns3:&sort=last_access&limit=50"},
      {"namespace ns3, by last access", "/v1/entries?namespace=ns3&sort=last_access&limit=50"},
  };
  for (const std::string& target : extra) {
    queries.emplace_back(target.substr(0, 36), target);
  }
  std::printf("\n%-36s %10s %10s %6s  %-24s %s\n", "GET /v1/entries (50 rows)", "median ms",
              "worst ms", "rows", "", "every run, ms");
  for (const auto& [name, target] : queries) {
    const Timing t = time_query(handler, target, runs);
    std::string every;
    for (const double ms : t.runs) {
      every += (every.empty() ? "" : ", ") + std::to_string(ms).substr(0, 6);
    }
    std::printf("%-36s %10.2f %10.2f %6zu  %-24s %s\n", name.c_str(), t.median, t.worst, t.rows,
                t.note.c_str(), every.c_str());
  }
  std::printf("peak RSS after the pages: %ld MiB\n", peak_rss_mib());

  // The anchor: the whole listing at once, as each page read it before.
  std::vector<double> ms;
  std::size_t listed = 0;
  for (int r = 0; r < std::min(runs, 3); ++r) {
    storage::ListOptions all;
    all.area = storage::Area::kAction;
    all.servable_only = true;
    const auto start = Clock::now();
    auto got = store.list(all);
    ms.push_back(ms_since(start));
    listed = got ? got->size() : 0;
  }
  std::sort(ms.begin(), ms.end());
  std::printf("\nanchor: Store::list of every action record: %.1f ms median, %zu rows "
              "(peak RSS %ld MiB)\n",
              ms[ms.size() / 2], listed, peak_rss_mib());
  return 0;
}
