// storage_bench: get/put throughput and latency of every store at 1 KiB,
// 64 KiB and 1 MiB, against raw hiredis GET/SET on the same redis-server in
// the same run. Prints ops/s, p50 and p99, and each store's ratio to the anchor.
//
//   build/bench/storage_bench [--quick] [google-benchmark flags]

#include "redis_server.h"
#include "temp_dir.h"

#include <kcache/storage/framed_store.h>
#include <kcache/storage/memory_store.h>
#include <kcache/storage/redis_store.h>
#include <kcache/storage/rocksdb_store.h>
#include <kcache/storage/tiered_store.h>

#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>

namespace {

using namespace kcache::storage;
using Clock = std::chrono::steady_clock;

constexpr int kKeysPerSize = 32;
const std::vector<std::size_t> kSizes = {1 << 10, 64 << 10, 1 << 20};

std::string size_label(std::size_t n) {
  return n >= (1 << 20) ? std::to_string(n >> 20) + "MiB" : std::to_string(n >> 10) + "KiB";
}

std::string payload(std::size_t n, std::uint64_t seed) {
  // Half random, half repetitive: roughly how compiled kernels compress (2x).
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (std::size_t i = 0; i < n / 2; ++i) {
    out[i] = static_cast<char>(rng() & 0xFF);
  }
  for (std::size_t i = n / 2; i < n; ++i) {
    out[i] = static_cast<char>("FMA R1, R2, R3 ;"[i % 16]);
  }
  return out;
}

struct Op {
  std::function<void(const std::string& key, const std::string& value)> put;
  std::function<std::size_t(const std::string& key)> get; // bytes read
};

// Raw hiredis on one connection: the anchor every store is compared with.
class HiredisAnchor {
public:
  explicit HiredisAnchor(int port) : ctx_(redisConnect("127.0.0.1", port), &redisFree) {
    if (!ctx_ || ctx_->err != 0) {
      throw std::runtime_error("anchor: cannot connect to redis-server");
    }
  }
  void set(const std::string& key, const std::string& value) {
    freeReplyObject(redisCommand(ctx_.get(), "SET anchor:%b %b", key.data(), key.size(),
                                 value.data(), value.size()));
  }
  std::size_t get(const std::string& key) {
    auto* r =
        static_cast<redisReply*>(redisCommand(ctx_.get(), "GET anchor:%b", key.data(), key.size()));
    const std::size_t n = r != nullptr && r->type == REDIS_REPLY_STRING ? r->len : 0;
    freeReplyObject(r);
    return n;
  }

private:
  std::unique_ptr<redisContext, decltype(&redisFree)> ctx_;
};

struct Result {
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
};
std::map<std::string, Result> g_results; // "get/rocksdb/64KiB" -> numbers

void run_op(benchmark::State& state, const std::string& name, bool is_get, std::size_t size,
            Op& op) {
  std::vector<std::string> keys;
  keys.reserve(kKeysPerSize);
  for (int i = 0; i < kKeysPerSize; ++i) {
    keys.push_back("bench-" + size_label(size) + "-" + std::to_string(i));
  }
  const std::string value = payload(size, size);
  for (const std::string& key : keys) {
    op.put(key, value); // gets read existing keys
  }
  std::vector<double> latencies_us;
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& key = keys[i++ % keys.size()];
    const auto start = Clock::now();
    if (is_get) {
      bytes += op.get(key);
    } else {
      op.put(key, value);
      bytes += size;
    }
    latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  if (is_get && bytes != size * latencies_us.size()) {
    state.SkipWithError("a get missed or returned the wrong size");
    return;
  }
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) {
    return latencies_us[static_cast<std::size_t>(p * static_cast<double>(latencies_us.size() - 1))];
  };
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
  double total_s = 0;
  for (double l : latencies_us) {
    total_s += l / 1e6;
  }
  g_results[name] =
      Result{static_cast<double>(latencies_us.size()) / total_s, pct(0.50), pct(0.99)};
}

void print_table() {
  std::printf("\n%-6s %-8s %-10s %12s %10s %10s %14s\n", "op", "size", "store", "ops/s", "p50 us",
              "p99 us", "vs hiredis");
  for (const char* op : {"get", "put"}) {
    for (std::size_t size : kSizes) {
      const std::string anchor = std::string(op) + "/hiredis/" + size_label(size);
      const auto a = g_results.find(anchor);
      for (const char* store : {"hiredis", "memory", "rocksdb", "redis", "tiered"}) {
        const auto it = g_results.find(std::string(op) + "/" + store + "/" + size_label(size));
        if (it == g_results.end()) {
          continue;
        }
        const double ratio = a == g_results.end() ? 0 : it->second.ops_per_s / a->second.ops_per_s;
        std::printf("%-6s %-8s %-10s %12.0f %10.1f %10.1f %13.2fx\n", op, size_label(size).c_str(),
                    store, it->second.ops_per_s, it->second.p50_us, it->second.p99_us, ratio);
      }
    }
  }
  std::printf("\nratio = store ops/s / raw hiredis ops/s on the same redis-server, same payloads,\n"
              "one client thread. Stores frame values (zstd + SHA-256 verify on read).\n");
}

} // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  kcache::testing::RedisServer redis;
  kcache::testing::TempDir dir;
  HiredisAnchor anchor(redis.port());

  RedisOptions redis_options;
  redis_options.port = redis.port();
  redis_options.ns = "bench";
  RocksDbOptions rocks_options;
  rocks_options.path = (dir.path() / "rocksdb").string();
  auto rocks = RocksDbStore::open(rocks_options);
  if (!rocks) {
    std::fprintf(stderr, "%s\n", rocks.error().message.c_str());
    return 1;
  }
  RocksDbOptions tier_rocks = rocks_options;
  tier_rocks.path = (dir.path() / "tier-rocksdb").string();
  auto tier_rocks_store = RocksDbStore::open(tier_rocks);

  std::map<std::string, std::unique_ptr<Store>> stores;
  stores["memory"] = std::make_unique<MemoryStore>(1ULL << 30);
  stores["rocksdb"] = std::make_unique<FramedStore>(std::move(*rocks));
  stores["redis"] = std::make_unique<FramedStore>(std::make_unique<RedisStore>(redis_options));
  std::vector<std::unique_ptr<Store>> tiers;
  tiers.push_back(std::make_unique<MemoryStore>(1ULL << 30));
  tiers.push_back(std::make_unique<FramedStore>(std::move(*tier_rocks_store)));
  tiers.push_back(std::make_unique<FramedStore>(std::make_unique<RedisStore>(redis_options)));
  stores["tiered"] = std::make_unique<TieredStore>(std::move(tiers));

  std::map<std::string, Op> ops;
  ops["hiredis"] = Op{[&](const std::string& k, const std::string& v) { anchor.set(k, v); },
                      [&](const std::string& k) { return anchor.get(k); }};
  for (auto& [name, store] : stores) {
    Store* s = store.get();
    ops[name] =
        Op{[s](const std::string& k, const std::string& v) { (void)s->put(Area::kCas, k, v); },
           [s](const std::string& k) {
             auto r = s->get(Area::kCas, k);
             return r && r->has_value() ? (*r)->size() : std::size_t{0};
           }};
  }
  for (const char* op : {"get", "put"}) {
    for (std::size_t size : kSizes) {
      for (const char* store : {"hiredis", "memory", "rocksdb", "redis", "tiered"}) {
        const std::string name = std::string(op) + "/" + store + "/" + size_label(size);
        const bool is_get = std::strcmp(op, "get") == 0;
        auto* b = benchmark::RegisterBenchmark(
            name.c_str(), [name, is_get, size, &ops, store](benchmark::State& st) {
              run_op(st, name, is_get, size, ops.at(store));
            });
        b->UseRealTime()->Unit(benchmark::kMicrosecond);
        b->MinTime(quick ? 0.05 : 0.5);
      }
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_table();
  return 0;
}
