// cluster_bench: cluster mode (issue 15) on one redis-server and real kcached
// nodes (--cluster, one shared signing key), with the local mode as the
// anchor in the same run. Every figure is the median of --runs runs (3), and
// every run is printed.
//   throughput  the demo corpus's CPU kernels (clang + lld in kcache-worker),
//               submitted round-robin over 1, 2 and 3 nodes of one worker
//               each; a local kcached of one worker as the anchor
//   queue       the same tiny C++ compile, one job at a time, through the
//               local queue and through the Redis Streams queue: the wall
//               time around the worker's compile is the queue's cost
//   leases      POST /v1/leases on a cluster node vs a local one; a waiter
//               in get(key, wait) on node B woken by the holder's put on A
//   commands    Redis commands per hit, put, compile and lease (INFO
//               commandstats deltas, the idle background subtracted)
//   memory      Redis used_memory per stored entry, by payload size
//
//   build/release/bench/cluster_bench [--runs N] [--skip-throughput]

#include "corpus.h"
#include "kcached_process.h"
#include "redis_server.h"
#include "temp_dir.h"

#include <kcache/client/client.h>
#include <kcache/protocol/record_signature.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace kcache;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using Nodes = std::vector<std::unique_ptr<testing::KcachedProcess>>;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string runs_text(const std::vector<double>& v, const char* format) {
  std::string out;
  for (double x : v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, format, x);
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return out;
}

std::unique_ptr<client::Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = 60s;
  return std::move(*client::Client::create(o));
}

// A run-unique tiny compile (clang, ~tens of ms).
std::string tiny_spec(const std::string& tag) {
  return nlohmann::json{
      {"backend", "cpp"},
      {"source",
       {{"name", "kernel.cpp"}, {"text", "extern \"C\" int value_" + tag + "() { return 7; }"}}},
      {"options", {"-O1", "-std=c++20"}},
      {"target", "x86-64-v2"},
      {"output", "object"}}
      .dump();
}

// The bench's world: one redis-server and the cluster's signing key.
struct World {
  testing::RedisServer redis;
  testing::TempDir dir;
  std::string signing_key = (dir.path() / "cluster.pem").string();
  int namespaces = 0;

  World() {
    if (auto key = protocol::SigningKey::generate(); !key || !key->save(signing_key)) {
      throw std::runtime_error("cannot make a signing key");
    }
  }
  // Fresh namespace per use: nothing cached from an earlier run.
  std::string url() { return redis.url("namespace=cb" + std::to_string(++namespaces)); }

  // `count` nodes sharing one namespace; cluster=false: independent local
  // nodes that still use the Redis store tier (only the queue differs).
  Nodes start(int count, bool cluster) {
    const std::string redis_url = url();
    Nodes nodes;
    for (int i = 0; i < count; ++i) {
      std::vector<std::string> args = {"--redis-url", redis_url, "--signing-key", signing_key,
                                       "--workers",   "1",       "--log-level",   "warn"};
      if (cluster) {
        args.insert(args.end(), {"--cluster", "--node-id", "node-" + std::to_string(i)});
      }
      nodes.push_back(std::make_unique<testing::KcachedProcess>(args));
    }
    return nodes;
  }
};

// --- throughput --------------------------------------------------------------

struct Throughput {
  double wall_ms = 0;
  double compile_ms = 0; // the workers' compile time, summed over jobs
  std::size_t failures = 0;
};

Throughput compile_corpus(World& world, const std::vector<trainer::Kernel>& kernels, int count,
                          bool cluster) {
  Nodes nodes = world.start(count, cluster);
  std::vector<std::unique_ptr<client::Client>> clients;
  for (auto& n : nodes) {
    clients.push_back(connect(n->url()));
  }
  Throughput out;
  std::vector<std::pair<std::size_t, std::string>> jobs; // node, job id
  const auto start = Clock::now();
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::size_t node = i % nodes.size();
    auto s = clients[node]->submit("bench-" + std::to_string(i),
                                   compiler::spec_to_json(kernels[i].spec));
    if (s && s->job) {
      jobs.emplace_back(node, s->job->id);
    } else {
      ++out.failures;
    }
  }
  for (const auto& [node, id] : jobs) {
    auto job = clients[node]->job(id, 5min);
    if (!job || job->state != client::JobState::kSucceeded) {
      ++out.failures;
      continue;
    }
    out.compile_ms += static_cast<double>(job->compile_ms);
  }
  out.wall_ms = ms_since(start);
  if (out.failures > 0) {
    for (auto& n : nodes) {
      std::fprintf(stderr, "%s\n", n->log().c_str());
    }
  }
  return out;
}

std::size_t throughput(World& world, int runs) {
  std::vector<trainer::Kernel> kernels;
  for (trainer::Kernel& k : trainer::build_corpus("x86-64-v3")) {
    if (k.device == trainer::Device::kCpu) {
      kernels.push_back(std::move(k));
    }
  }
  const double n = static_cast<double>(kernels.size());
  std::printf("\n== compile throughput: the demo corpus's %zu CPU kernels, submitted round-robin, "
              "one worker per node, %u cores\n",
              kernels.size(), std::thread::hardware_concurrency());
  std::printf("| %-26s | %-26s | %8s | %8s | %10s | %14s |\n|---|---|---|---|---|---|\n", "mode",
              "jobs/s per run", "jobs/s", "vs 1 node", "vs local", "overhead / job");
  struct Mode {
    const char* name;
    int nodes;
    bool cluster;
  };
  const Mode modes[] = {{"local kcached (anchor)", 1, false},
                        {"cluster, 1 node", 1, true},
                        {"cluster, 2 nodes", 2, true},
                        {"cluster, 3 nodes", 3, true}};
  std::size_t failures = 0;
  double local_rate = 0, one_node_rate = 0;
  for (const Mode& m : modes) {
    std::vector<double> rates, overheads;
    for (int r = 0; r < runs; ++r) {
      const Throughput t = compile_corpus(world, kernels, m.nodes, m.cluster);
      failures += t.failures;
      rates.push_back(n / (t.wall_ms / 1000));
      // Worker time not spent compiling, per job: queue, publish, waiting.
      overheads.push_back((t.wall_ms * m.nodes - t.compile_ms) / n);
    }
    const double rate = median(rates);
    if (!m.cluster) {
      local_rate = rate;
    } else if (m.nodes == 1) {
      one_node_rate = rate;
    }
    std::printf("| %-26s | %-26s | %8.2f | %7.2fx | %9.2fx | %11.1f ms |\n", m.name,
                runs_text(rates, "%.2f").c_str(), rate,
                m.cluster && one_node_rate > 0 ? rate / one_node_rate : 0.0,
                local_rate > 0 ? rate / local_rate : 0.0, median(overheads));
  }
  std::printf("overhead / job = (wall x nodes - the workers' summed compile time) / jobs: worker "
              "time not compiling (on 2 cores, 3 workers also slow each other's compiles)\n");
  return failures;
}

// --- queue overhead -----------------------------------------------------------

struct QueueRun {
  double around_compile_ms = 0; // median over jobs: end to end - compile_ms
  double submit_to_start_ms = 0;
  std::size_t failures = 0;
};

QueueRun queue_run(World& world, bool cluster, int jobs, int run) {
  Nodes nodes = world.start(1, cluster);
  auto c = connect(nodes[0]->url());
  QueueRun out;
  std::vector<double> around, to_start;
  for (int i = 0; i <= jobs; ++i) {
    const std::string tag =
        std::string(cluster ? "c" : "l") + std::to_string(run) + "_" + std::to_string(i);
    const auto start = Clock::now();
    auto s = c->submit("queue-" + tag, tiny_spec(tag));
    if (!s || !s->job) {
      ++out.failures;
      continue;
    }
    auto job = c->job(s->job->id, 30s);
    const double wall = ms_since(start);
    if (!job || job->state != client::JobState::kSucceeded) {
      ++out.failures;
      continue;
    }
    if (i == 0) {
      continue; // the first job warms connections and the worker
    }
    around.push_back(wall - static_cast<double>(job->compile_ms));
    to_start.push_back(static_cast<double>(job->started_ms - job->submitted_ms));
  }
  out.around_compile_ms = median(around);
  out.submit_to_start_ms = median(to_start);
  return out;
}

std::size_t queue_overhead(World& world, int runs) {
  constexpr int kJobs = 10;
  std::printf("\n== queue overhead: %d tiny compiles one at a time (submit, long-poll until done) "
              "on one node of one worker; both modes use the same Redis store tier\n",
              kJobs);
  std::printf("| %-30s | %-22s | %9s | %-16s | %15s |\n|---|---|---|---|---|\n", "queue",
              "per run (median job)", "median", "submit->start", "(job timestamps)");
  std::size_t failures = 0;
  double local = 0, redis = 0;
  for (bool cluster : {false, true}) {
    std::vector<double> around, to_start;
    for (int r = 0; r < runs; ++r) {
      const QueueRun q = queue_run(world, cluster, kJobs, r);
      failures += q.failures;
      around.push_back(q.around_compile_ms);
      to_start.push_back(q.submit_to_start_ms);
    }
    (cluster ? redis : local) = median(around);
    std::printf("| %-30s | %-22s | %6.2f ms | %-16s | %12.1f ms |\n",
                cluster ? "Redis Streams (--cluster)" : "local (anchor)",
                runs_text(around, "%.2f").c_str(), median(around),
                runs_text(to_start, "%.0f").c_str(), median(to_start));
  }
  std::printf("time around the compile (end to end - the worker's compile_ms), per job: local "
              "%.2f ms, Redis Streams %.2f ms; added by the Redis path: %.2f ms (goal <= 2 ms: "
              "%s)\n",
              local, redis, redis - local, redis - local <= 2.0 ? "met" : "NOT met");
  return failures;
}

// --- leases ------------------------------------------------------------------

// Median microseconds of `count` POST /v1/leases of distinct keys on `node`.
double acquire_us(const testing::KcachedProcess& node, int count, const std::string& tag,
                  std::size_t& failures) {
  auto c = connect(node.url());
  std::vector<double> us;
  for (int i = 0; i < count; ++i) {
    const std::string key = "kc1-lease-" + tag + "-" + std::to_string(i);
    const auto start = Clock::now();
    auto lease = c->acquire_lease(key, 30s, "rank0");
    us.push_back(ms_since(start) * 1000);
    if (!lease || !lease->granted) {
      ++failures;
    } else {
      (void)c->release_lease(key, lease->token);
    }
  }
  return median(us);
}

// Median ms from the holder's put on `a` to the waiter's hit on `b`.
double wait_ms(const testing::KcachedProcess& a, const testing::KcachedProcess& b, int count,
               const std::string& tag, std::size_t& failures) {
  auto holder = connect(a.url());
  auto waiter = connect(b.url());
  std::vector<double> ms;
  for (int i = 0; i < count; ++i) {
    const std::string key = "kc1-wait-" + tag + "-" + std::to_string(i);
    auto lease = holder->acquire_lease(key, 30s, "holder");
    if (!lease || !lease->granted) {
      ++failures;
      continue;
    }
    auto got = std::async(std::launch::async, [&] {
      auto hit = waiter->get(key, 20s);
      return std::make_pair(hit && *hit, Clock::now());
    });
    std::this_thread::sleep_for(50ms); // the waiter is parked in get
    const auto put_at = Clock::now();
    if (!holder->put(key, {{"value", "produced " + key}})) {
      ++failures;
    }
    const auto [hit, at] = got.get();
    if (!hit) {
      ++failures;
      continue;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(at - put_at).count());
  }
  return median(ms);
}

std::size_t leases(World& world, int runs) {
  constexpr int kAcquires = 200, kWaits = 20;
  std::printf("\n== leases: %d acquires (+ release) of distinct keys; %d waits of a rank parked "
              "in get(key, 20s) for the holder's put\n",
              kAcquires, kWaits);
  std::size_t failures = 0;
  std::vector<double> local_acq, cluster_acq, local_wait, cross_wait;
  for (int r = 0; r < runs; ++r) {
    const std::string tag = std::to_string(r);
    {
      Nodes local = world.start(1, false);
      local_acq.push_back(acquire_us(*local[0], kAcquires, "l" + tag, failures));
      local_wait.push_back(wait_ms(*local[0], *local[0], kWaits, "l" + tag, failures));
    }
    Nodes cluster = world.start(2, true);
    std::this_thread::sleep_for(300ms); // B's subscription is connected
    cluster_acq.push_back(acquire_us(*cluster[0], kAcquires, "c" + tag, failures));
    cross_wait.push_back(wait_ms(*cluster[0], *cluster[1], kWaits, "c" + tag, failures));
  }
  std::printf("| %-44s | %-24s | %10s |\n|---|---|---|\n", "measure", "per run", "median");
  auto row = [](const char* name, const std::vector<double>& v, const char* unit) {
    std::printf("| %-44s | %-24s | %7.2f %s |\n", name, runs_text(v, "%.2f").c_str(), median(v),
                unit);
  };
  row("acquire, local node (anchor)", local_acq, "us");
  row("acquire, cluster node (Redis)", cluster_acq, "us");
  row("put -> waiter's hit, one local node (anchor)", local_wait, "ms");
  row("put on node A -> waiter's hit on node B", cross_wait, "ms");
  std::printf("cluster / local: acquire %.2fx, wait %.2fx\n",
              median(local_acq) > 0 ? median(cluster_acq) / median(local_acq) : 0.0,
              median(local_wait) > 0 ? median(cross_wait) / median(local_wait) : 0.0);
  return failures;
}

// --- Redis commands per operation ----------------------------------------------

using Counts = std::map<std::string, double>;

// INFO commandstats as command -> calls.
Counts command_stats(testing::RedisAdmin& admin) {
  Counts out;
  std::istringstream in(admin.run({"INFO", "commandstats"}));
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    const auto calls = line.find("calls=");
    // The bench's own INFO and CONFIG RESETSTAT are not kcache's.
    if (line.rfind("cmdstat_", 0) != 0 || colon == std::string::npos ||
        calls == std::string::npos || line.rfind("cmdstat_config", 0) == 0) {
      continue;
    }
    out[line.substr(8, colon - 8)] = std::stod(line.substr(calls + 6));
  }
  return out;
}

// Commands per call of `op` (run `count` times), less the idle background.
Counts per_operation(testing::RedisAdmin& admin, const Counts& idle_per_s, int count,
                     const std::function<void(int)>& op) {
  admin.run({"CONFIG", "RESETSTAT"});
  const auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    op(i);
  }
  const double seconds = ms_since(start) / 1000;
  Counts out;
  for (const auto& [cmd, calls] : command_stats(admin)) {
    const auto idle = idle_per_s.find(cmd);
    const double bg = idle == idle_per_s.end() ? 0 : idle->second * seconds;
    const double per = (calls - bg - (cmd == "info" ? 1 : 0)) / count;
    if (per >= 0.05) {
      out[cmd] = per;
    }
  }
  return out;
}

std::string counts_text(const Counts& c) {
  std::string out;
  double total = 0;
  for (const auto& [cmd, n] : c) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.2f", out.empty() ? "" : ", ", cmd.c_str(), n);
    out += buf;
    total += n;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, " (total %.2f)", total);
  return out + buf;
}

std::size_t commands(World& world) {
  std::printf("\n== Redis commands per operation (INFO commandstats; two cluster nodes, the idle "
              "background measured over 3 s and subtracted)\n");
  testing::RedisAdmin admin(world.redis.port());
  Nodes nodes = world.start(2, true);
  auto a = connect(nodes[0]->url());
  auto b = connect(nodes[1]->url());
  std::this_thread::sleep_for(500ms);
  std::size_t failures = 0;

  admin.run({"CONFIG", "RESETSTAT"});
  std::this_thread::sleep_for(3s);
  Counts idle = command_stats(admin);
  for (auto& [cmd, calls] : idle) {
    calls = (calls - (cmd == "info" ? 1 : 0)) / 3.0;
  }
  std::printf("| %-46s | %s |\n|---|---|\n", "operation", "commands per operation");
  std::printf("| %-46s | %s |\n", "idle background, per second (2 nodes)",
              counts_text(idle).c_str());
  constexpr int kOps = 40;
  auto show = [&](const char* name, int count, const std::function<void(int)>& op) {
    std::printf("| %-46s | %s |\n", name,
                counts_text(per_operation(admin, idle, count, op)).c_str());
  };
  show("put of 1 KiB (node A)", kOps, [&](int i) {
    // Distinct contents: each put stores a new blob (no local-tier dedup).
    std::string value(1024, 'x');
    value.replace(0, 8, std::to_string(10'000'000 + i));
    failures += !a->put("kc1-cmd-" + std::to_string(i), {{"value", value}});
  });
  show("get on node B of A's put (Redis-tier hit)", kOps, [&](int i) {
    auto hit = b->get("kc1-cmd-" + std::to_string(i));
    failures += !(hit && *hit);
  });
  show("get on node B again (local-tier hit)", kOps, [&](int i) {
    auto hit = b->get("kc1-cmd-" + std::to_string(i));
    failures += !(hit && *hit);
  });
  show("get of an absent key (miss)", kOps, [&](int i) {
    auto hit = b->get("kc1-absent-" + std::to_string(i));
    failures += !hit || hit->has_value();
  });
  show("lease acquire + release (node A)", kOps, [&](int i) {
    const std::string key = "kc1-cmd-lease-" + std::to_string(i);
    auto lease = a->acquire_lease(key, 30s, "rank0");
    failures += !(lease && lease->granted && a->release_lease(key, lease->token));
  });
  show("compile: submit on A, wait until done (tiny spec)", 10, [&](int i) {
    const std::string tag = "cmd" + std::to_string(i);
    auto s = a->submit("kc1-cmd-job-" + tag, tiny_spec(tag));
    if (!s || !s->job) {
      ++failures;
      return;
    }
    auto job = a->job(s->job->id, 30s);
    failures += !(job && job->state == client::JobState::kSucceeded);
  });
  return failures;
}

// --- memory per entry ------------------------------------------------------------

double used_memory(testing::RedisAdmin& admin) {
  const std::string info = admin.run({"INFO", "memory"});
  const auto at = info.find("used_memory:");
  return at == std::string::npos ? 0 : std::stod(info.substr(at + 12));
}

std::size_t memory(World& world) {
  std::printf("\n== Redis memory per stored entry (INFO memory used_memory delta over N puts of "
              "one file through kcached, and the keys each put adds)\n");
  std::printf("| %-10s | %6s | %14s | %14s | %12s |\n|---|---|---|---|---|\n", "payload", "puts",
              "bytes / entry", "over payload", "keys / entry");
  testing::RedisAdmin admin(world.redis.port());
  Nodes nodes = world.start(1, false);
  auto c = connect(nodes[0]->url());
  std::size_t failures = 0;
  std::mt19937_64 rng(15);
  const std::pair<std::size_t, int> sizes[] = {
      {100, 200}, {1024, 200}, {64 * 1024, 50}, {1024 * 1024, 10}, {4 * 1024 * 1024, 4}};
  for (const auto& [size, puts] : sizes) {
    const double keys_before = std::stod(admin.run({"DBSIZE"}));
    const double before = used_memory(admin);
    for (int i = 0; i < puts; ++i) {
      // Random bytes: distinct (no content-addressed sharing) and
      // incompressible (the tier stores large values compressed).
      std::string payload(size, '\0');
      for (char& ch : payload) {
        ch = static_cast<char>(rng() & 0xFF);
      }
      failures += !c->put("kc1-mem-" + std::to_string(size) + "-" + std::to_string(i),
                          {{"value", payload}});
    }
    const double per = (used_memory(admin) - before) / puts;
    const double keys = (std::stod(admin.run({"DBSIZE"})) - keys_before) / puts;
    std::printf("| %7zu B | %6d | %14.0f | %14.0f | %12.2f |\n", size, puts, per,
                per - static_cast<double>(size), keys);
  }
  return failures;
}

} // namespace

int main(int argc, char** argv) {
  int runs = 3;
  bool skip_throughput = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--skip-throughput") {
      skip_throughput = true;
    } else {
      std::fprintf(stderr, "usage: cluster_bench [--runs N] [--skip-throughput]\n");
      return 2;
    }
  }
  std::printf("cluster_bench: one redis-server, kcached nodes with --cluster (local kcached as the "
              "anchor), medians of %d runs, %u cores\n",
              runs, std::thread::hardware_concurrency());
  const auto start = Clock::now();
  World world;
  std::size_t failures = 0;
  if (!skip_throughput) {
    failures += throughput(world, runs);
  }
  failures += queue_overhead(world, runs);
  failures += leases(world, runs);
  failures += commands(world);
  failures += memory(world);
  std::printf("\n%.0f s in all; %zu failures\n", ms_since(start) / 1000, failures);
  return failures == 0 ? 0 : 1;
}
