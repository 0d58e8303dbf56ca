// Issue 13's soak: every attack of the reliability suite at once, each in its
// own thread and in a loop, against ONE real kcached for KCACHE_SOAK_SECONDS
// (default 600), while a well-behaved client puts, gets and submits and
// records its latencies. A line of figures every 30 s, a table at the end.
// Asserted: kcached alive throughout, its RSS under a stated bound, the good
// client's p99 within a stated factor of its idle p99, no wrong artifact, and
// every acknowledged write readable after a final restart. Label `soak` (out
// of CI and scripts/test). KCACHE_KCACHED_BINARY runs a release kcached.

#include "../storage/tmpfs_mount.h"
#include "http_attacks.h"
#include "job_attacks.h"
#include "kcached_process.h"
#include "process_memory.h"
#include "random_bytes.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

namespace kcache {
namespace {

using client::Client;
using client::HttpMethod;
using testing::KcachedProcess;
using testing::rss_mb;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using namespace std::chrono_literals;

// Strong tokens (256 bits): the good client's, and the attackers' (a second
// submitter, so its refused searches never count against the good one).
constexpr const char* kGoodToken =
    "5f0c1e7a9b3d48e2a6c4f1b8d7e9a3c2e1d0f9a8b7c6d5e4f3a2b1c0d9e8f7a6";
constexpr const char* kAttackerToken =
    "c83a1f5e0d7b49a6b2e4c9f1a8d3e7b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9";
constexpr std::uint64_t kMiB = 1 << 20;

// The limits the soak runs kcached under: the RSS bound is built from them.
constexpr int kMemoryTierMiB = 64, kBodyMemoryMiB = 64, kSendMemoryMiB = 64;
constexpr int kIoThreads = 4, kArtifactMiB = 20;

int soak_seconds() {
  const char* env = std::getenv("KCACHE_SOAK_SECONDS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 600;
}

std::string token_config(const testing::TempDir& dir) {
  std::string path = (dir.path() / "tokens.toml").string();
  std::ofstream(path) << "[[tokens]]\ntoken = \"" << kGoodToken << "\"\nrole = \"write\"\n"
                      << "[[tokens]]\ntoken = \"" << kAttackerToken << "\"\nrole = \"write\"\n";
  ::chmod(path.c_str(), 0600); // plaintext tokens only in a file no one else reads
  return path;
}

std::unique_ptr<Client> connect(const KcachedProcess& kcached, const char* token) {
  client::ClientOptions o;
  o.url = kcached.url();
  o.token = token;
  o.timeout = 10s;
  o.down_backoff = 50ms;
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

// One attack's tally: answers it expects (the refusal it is owed), answers
// it does not (a crash would show here first), and attempts that got none.
struct Tally {
  std::string name;
  std::atomic<int> runs{0}, expected{0}, unexpected{0}, no_answer{0};
  std::mutex mu;
  std::string last_unexpected;

  // `answer`: what came back, kept for the report when unexpected.
  void count(int status, std::initializer_list<int> wanted, const std::string& answer = {}) {
    ++runs;
    if (status == 0) {
      ++no_answer;
      return;
    }
    for (const int w : wanted) {
      if (status == w) {
        ++expected;
        return;
      }
    }
    ++unexpected;
    std::lock_guard lock(mu);
    last_unexpected = answer.substr(0, answer.find("\r\n")) + " " +
                      answer.substr(std::min(answer.size(), answer.find("\r\n\r\n") + 4), 160);
  }
};

// One request on a fresh connection from `source`, counted in `tally`.
void exchange(Tally& tally, std::initializer_list<int> wanted, int port, const char* source,
              const std::string& request, std::chrono::milliseconds timeout = 10s) {
  const int fd = testing::connect_from(port, source);
  std::string answer;
  if (fd >= 0) {
    if (testing::send_all(fd, request)) {
      answer = testing::read_response(fd, timeout);
    }
    close(fd);
  }
  tally.count(testing::status_of(answer), wanted, answer);
}

std::string post(const std::string& target, const std::string& body, const char* token) {
  return "POST " + target + " HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// A compiled kernel's artifact is an ELF object defining its own symbol.
bool is_kernel(const client::Artifact& a, int n) {
  const std::string symbol = "soak_kernel_" + std::to_string(n) + std::string(1, '\0');
  for (const client::File& f : a.files) {
    if (f.data.rfind("\x7f"
                     "ELF",
                     0) == 0 &&
        f.data.find(symbol) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// The well-behaved client: puts, gets what it put, submits a compile now and
// then; every call timed. Single-threaded, as a trainer's cache calls are.
class GoodClient {
public:
  GoodClient(const KcachedProcess& kcached, std::uint64_t first_seed)
      : c_(connect(kcached, kGoodToken)), seed_(first_seed) {}

  // One round: a put, a get of an earlier put, every 20th round a submit,
  // and a look at one job in flight.
  void round() {
    put();
    get();
    if (++rounds_ % 20 == 0) {
      submit();
    }
    poll_job();
  }

  // Latencies (ms) since the last call.
  std::vector<double> take_latencies() {
    std::lock_guard lock(mu_);
    return std::exchange(recent_, {});
  }

  struct Acknowledged {
    std::string key;
    std::uint64_t seed;
    std::size_t size;
  };
  std::vector<Acknowledged> acknowledged() const {
    std::lock_guard lock(mu_);
    return acknowledged_;
  }
  std::vector<int> compiled() const {
    std::lock_guard lock(mu_);
    return compiled_;
  }

  // shed: 503 with Retry-After (a budget spent by the attackers): refused, not failed.
  std::atomic<int> puts{0}, disk_full{0}, shed{0}, gets{0}, errors{0}, wrong{0};
  std::atomic<int> submitted{0}, succeeded{0}, infrastructure{0}, store_full{0}, failed{0};
  std::string last_error() const {
    std::lock_guard lock(mu_);
    return last_error_;
  }
  std::string last_job_failure() const {
    std::lock_guard lock(mu_);
    return last_job_failure_;
  }

private:
  template <typename F> auto timed(F&& call) {
    const auto start = Clock::now();
    auto result = call();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    std::lock_guard lock(mu_);
    recent_.push_back(ms);
    return result;
  }
  void error(const client::ClientError& e, const std::string& what) {
    if (e.http_status == 503) {
      ++shed;
      return;
    }
    error(what + ": " + e.message);
  }
  void error(const std::string& what) {
    ++errors;
    std::lock_guard lock(mu_);
    last_error_ = what;
  }

  void put() {
    const std::uint64_t seed = seed_++;
    const std::size_t size = 1024 + seed % 7168;
    const std::string key = "soak-good-" + std::to_string(seed);
    auto res = timed([&] { return c_->put(key, {{"value", testing::random_bytes(size, seed)}}); });
    if (res) {
      ++puts;
      std::lock_guard lock(mu_);
      acknowledged_.push_back({key, seed, size});
    } else if (res.error().http_status == 507) {
      ++disk_full; // refused, not acknowledged: the disk attack has the disk
    } else {
      error(res.error(), "put " + key);
    }
  }

  void get() {
    Acknowledged a;
    {
      std::lock_guard lock(mu_);
      if (acknowledged_.empty()) {
        return;
      }
      a = acknowledged_[rng_() % acknowledged_.size()];
    }
    auto res = timed([&] { return c_->get(a.key); });
    if (!res) {
      error(res.error(), "get " + a.key);
    } else if (!res->has_value() || (*res)->files.size() != 1 ||
               (*res)->files[0].data != testing::random_bytes(a.size, a.seed)) {
      ++wrong;
    } else {
      ++gets;
    }
  }

  // A kernel whose result could not be stored (a full disk) is submitted
  // again: that failure must not have been remembered against it.
  void submit() {
    int n = next_kernel_;
    if (resubmit_.empty()) {
      ++next_kernel_;
    } else {
      n = resubmit_.back();
      resubmit_.pop_back();
    }
    const std::string source = "extern \"C\" int soak_kernel_" + std::to_string(n) +
                               "() { return " + std::to_string(n) + "; }\n";
    const std::string key = "soak-kernel-" + std::to_string(n);
    auto res = timed([&] { return c_->submit(key, testing::cpp_spec(source).dump()); });
    if (!res) {
      error(res.error(), "submit " + key);
      return;
    }
    if (res->status == "cached") {
      // Compiled before under its compile key (a store failure left this key
      // out): published here now, at once.
      check_cached(key, n);
      return;
    }
    if (!res->job || res->status == "failed-recently") {
      error("submit " + key + ": " + res->status + " " + res->message);
      return;
    }
    ++submitted;
    jobs_.emplace_back(res->job->id, n);
  }

  void check_cached(const std::string& key, int n) {
    auto got = timed([&] { return c_->get(key); });
    if (!got || !got->has_value()) {
      error("submit " + key + " answered cached, but a get found nothing");
    } else if (!is_kernel(**got, n)) {
      ++wrong;
    } else {
      ++succeeded;
      std::lock_guard lock(mu_);
      compiled_.push_back(n);
    }
  }

  void poll_job() {
    if (jobs_.empty()) {
      return;
    }
    const std::string id = jobs_.front().first;
    const int n = jobs_.front().second;
    jobs_.erase(jobs_.begin());
    auto res = timed([&] { return c_->job(id); });
    if (!res) {
      error(res.error(), "job " + id);
      jobs_.emplace_back(id, n);
      return;
    }
    if (!res->finished()) {
      jobs_.emplace_back(id, n);
      return;
    }
    const json done = json::parse(res->json, nullptr, false);
    const std::string state = done.value("state", std::string());
    if (state == "succeeded") {
      ++succeeded;
      std::lock_guard lock(mu_);
      compiled_.push_back(n);
    } else if (done.contains("error") && done["error"].value("code", "") == "infrastructure") {
      ++infrastructure; // killed on every attempt: retried, then failed, never cached
    } else if (done.contains("error") && done["error"].value("code", "") == "store") {
      ++store_full; // compiled, but the disk attack had the disk: not the spec's fault
      resubmit_.push_back(n);
    } else {
      ++failed;
      std::lock_guard lock(mu_);
      last_job_failure_ = res->json.substr(0, 600);
    }
  }

  std::unique_ptr<Client> c_;
  std::uint64_t seed_;
  std::mt19937_64 rng_{7};
  int rounds_ = 0, next_kernel_ = 0;
  std::vector<std::pair<std::string, int>> jobs_;
  std::vector<int> resubmit_;
  mutable std::mutex mu_;
  std::vector<double> recent_;
  std::vector<Acknowledged> acknowledged_;
  std::vector<int> compiled_;
  std::string last_error_, last_job_failure_;
};

// Loops `body` until `stop`, pausing `pause` between rounds.
std::thread loop(const std::atomic<bool>& stop, std::chrono::milliseconds pause,
                 std::function<void()> body) {
  return std::thread([&stop, pause, body = std::move(body)] {
    while (!stop) {
      body();
      for (auto until = Clock::now() + pause; !stop && Clock::now() < until;) {
        std::this_thread::sleep_for(20ms);
      }
    }
  });
}

TEST(Soak, EveryAttackAtOnce) {
  const int seconds = soak_seconds();
  testing::TempDir config_dir;
  testing::TmpfsMount disk(1024 * kMiB);
  std::vector<std::string> args = testing::worker_args();
  args.insert(args.end(), {"--config",
                           token_config(config_dir),
                           "--workers",
                           "1",
                           "--compile-timeout-s",
                           "60",
                           "--max-connections",
                           "200",
                           "--max-connections-per-peer",
                           "100",
                           "--header-timeout-s",
                           "2",
                           "--stall-timeout-s",
                           "3",
                           "--body-memory",
                           std::to_string(kBodyMemoryMiB) + "MiB",
                           "--max-body-bytes",
                           "48MiB",
                           "--send-memory",
                           std::to_string(kSendMemoryMiB) + "MiB",
                           "--memory-capacity",
                           std::to_string(kMemoryTierMiB) + "MiB",
                           "--max-spec-bytes",
                           "4MiB"});
  if (disk.mounted()) {
    args.insert(args.end(), {"--data-dir", (disk.path() / "data").string()});
  } else {
    std::printf("[ soak ] no disk attack: %s\n", disk.error().c_str());
  }
  KcachedProcess kcached(args);
  const int port = kcached.port();
  // ASan's shadow and quarantine: looser bounds for a sanitized kcached.
  const bool sanitized = testing::runs_sanitized(kcached.pid());
  std::printf("[ soak ] %d s against %s (pid %d, %s)\n", seconds,
              testing::built_binary("kcached").c_str(), kcached.pid(),
              sanitized ? "ASan" : "no sanitizer");

  // Idle: the good client alone, after a warm-up.
  GoodClient good(kcached, 0);
  for (const auto end = Clock::now() + 3s; Clock::now() < end;) {
    good.round();
  }
  good.take_latencies();
  for (const auto end = Clock::now() + 20s; Clock::now() < end;) {
    good.round();
    std::this_thread::sleep_for(10ms);
  }
  const std::vector<double> idle = good.take_latencies();
  const double idle_p50 = testing::percentile(idle, 0.5);
  const double idle_p99 = testing::percentile(idle, 0.99);
  std::this_thread::sleep_for(1500ms); // a trim after the warm-up's frees
  const double rss_idle = rss_mb(kcached.pid());
  // The budgets, each full at once, plus each I/O thread's two copies of the
  // largest value (store read, encoding) and allocator slack.
  const double rss_bound = rss_idle + kMemoryTierMiB + kBodyMemoryMiB + kSendMemoryMiB +
                           kIoThreads * 2 * kArtifactMiB + (sanitized ? 400.0 : 100.0);
  double idle_load = 0;
  std::ifstream("/proc/loadavg") >> idle_load;
  std::printf("[ soak ] idle: %zu calls, p50 %.2f ms, p99 %.2f ms (host load %.1f); RSS %.0f MB "
              "(bound %.0f MB)\n",
              idle.size(), idle_p50, idle_p99, idle_load, rss_idle, rss_bound);

  // What the non-readers fetch: a 20 MB artifact, put once.
  auto attacker = connect(kcached, kAttackerToken);
  ASSERT_TRUE(attacker->put("soak-big", {{"big.bin", std::string(kArtifactMiB * kMiB, 'Z')}}))
      << kcached.log();

  std::atomic<bool> stop{false};
  std::array<Tally, 8> tallies;
  enum { kNested, kSpec, kBodies, kSlow, kNonReaders, kAutotune, kKills, kDisk };
  const std::array<const char*, 8> names = {
      "nested JSON (100,000 '[')",     "spec of 100 MB / 5 MiB",   "500 MB bodies, no token",
      "slow heads, 2 x 150-300 conns", "50 non-readers of 20 MB",  "autotune 20,000 / 300",
      "kill -9 of kcache-worker",      "disk filled (1 GiB tmpfs)"};
  for (std::size_t i = 0; i < tallies.size(); ++i) {
    tallies[i].name = names[i];
  }
  std::vector<std::thread> threads;

  const std::string deep = std::string(100'000, '[');
  threads.push_back(loop(stop, 200ms, [&] {
    exchange(tallies[kNested], {400}, port, "127.0.0.4",
             post("/v1/jobs", "{\"spec\":" + deep, kAttackerToken));
    // A batch get is shed (503) while the non-readers hold the send budget.
    exchange(tallies[kNested], {400, 503}, port, "127.0.0.4",
             post("/v1/batch/get", "{\"keys\":" + deep + deep, kAttackerToken));
  }));
  const std::string five_mib = testing::spec_body(5 << 20);
  threads.push_back(loop(stop, 2s, [&, round = 0]() mutable {
    Tally& t = tallies[kSpec];
    const std::string head =
        "POST /v1/jobs HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer " +
        std::string(kAttackerToken) +
        "\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n";
    t.count(testing::stream_body(port, head, 100, "127.0.0.4").early_status, {413});
    if (++round % 5 == 0) { // within the JSON bound: refused once parsed
      exchange(t, {413}, port, "127.0.0.4", post("/v1/jobs", five_mib, kAttackerToken), 30s);
    }
  }));
  std::atomic<std::uint64_t> body_bytes{0};
  for (int i = 0; i < 3; ++i) {
    threads.push_back(loop(stop, 1s, [&] {
      const std::string head = "PUT /v1/cas/" + std::string(64, 'a') +
                               " HTTP/1.1\r\nHost: soak\r\nContent-Length: 524288000\r\n\r\n";
      const testing::BodyAttack a = testing::stream_body(port, head, 500, "127.0.0.6");
      body_bytes += a.sent;
      tallies[kBodies].count(a.early_status, {401});
    }));
  }
  std::optional<testing::SlowHeaders> slow_a, slow_b;
  slow_a.emplace(port, "127.0.0.2", 300); // over the per-peer cap
  slow_b.emplace(port, "127.0.0.5", 150); // the two together past the global cap
  const std::string fetch = "GET /v1/artifacts/soak-big HTTP/1.1\r\nHost: soak\r\n"
                            "Authorization: Bearer " +
                            std::string(kGoodToken) + "\r\n\r\n";
  threads.push_back(loop(stop, 5s, [&] {
    const std::vector<int> fds = testing::open_non_readers(port, "127.0.0.3", fetch, 50);
    for (int i = 0; i < 50 && !stop; ++i) {
      std::this_thread::sleep_for(100ms);
    }
    for (const int fd : fds) {
      // What came back before the stall timeout cut it: a head, or nothing.
      char buf[16] = {};
      const ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
      tallies[kNonReaders].count(n > 0 ? testing::status_of(buf) : 0, {200, 503});
      close(fd);
    }
  }));
  const std::string huge_search = json{{"spec", testing::autotune_search(200, 100)}}.dump();
  const std::string over_quota = json{{"spec", testing::autotune_search(30, 10)}}.dump();
  threads.push_back(loop(stop, 5s, [&] {
    exchange(tallies[kAutotune], {400}, port, "127.0.0.4",
             post("/v1/jobs", huge_search, kAttackerToken));
    exchange(tallies[kAutotune], {400}, port, "127.0.0.4",
             post("/v1/jobs", over_quota, kAttackerToken));
  }));
  threads.push_back(loop(stop, 7s, [&] {
    for (const auto until = Clock::now() + 3s; !stop && Clock::now() < until;) {
      const std::vector<pid_t> workers = testing::workers_of(kcached.pid());
      if (!workers.empty()) {
        // 0 when the worker had finished already (no victim).
        tallies[kKills].count(::kill(workers.front(), SIGKILL) == 0 ? 1 : 0, {1});
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  }));
  if (disk.mounted()) {
    threads.push_back(loop(stop, 20s, [&, seed = std::uint64_t{1} << 40]() mutable {
      // Fill from outside to 32 MiB short, then put 1 MiB blobs until 507;
      // hold the disk full 10 s, then give it back.
      disk.fill(32 * kMiB);
      for (int i = 0; i < 64 && !stop; ++i) {
        const std::string body = testing::random_bytes(kMiB, seed++);
        auto res = attacker->request(HttpMethod::kPut,
                                     "/v1/cas/" + cachekey::to_hex(cachekey::Sha256::of(body)),
                                     body, "application/octet-stream");
        const int status = res ? res->status : 0;
        tallies[kDisk].count(status, {201, 507, 503});
        if (status == 507) {
          break;
        }
      }
      for (int i = 0; i < 100 && !stop; ++i) {
        std::this_thread::sleep_for(100ms);
      }
      disk.release();
    }));
  }

  // The good client, and a sampler of kcached's RSS and life.
  std::atomic<double> rss_peak{rss_idle};
  std::atomic<bool> died{false};
  std::thread sampler([&] {
    while (!stop) {
      const double rss = rss_mb(kcached.pid());
      if (rss < 0) {
        died = true;
      }
      rss_peak = std::max(rss_peak.load(), rss);
      std::this_thread::sleep_for(100ms);
    }
  });
  std::vector<double> attacked;
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(seconds);
  const auto report_every = std::chrono::seconds(std::clamp(seconds / 4, 5, 30));
  auto next_report = start + report_every;
  // load: the host's 1-minute load average (the machine may be shared).
  std::printf("[ soak ] %-6s %5s %7s %7s %6s %6s %8s %8s %5s %6s %6s %5s %s\n", "t s", "load",
              "RSS MB", "peak", "conns", "calls", "p50 ms", "p99 ms", "errs", "507s", "503s",
              "jobs", "unexpected/attack");
  double load_max = 0;
  while (Clock::now() < end && !died) {
    good.round();
    std::this_thread::sleep_for(10ms);
    if (Clock::now() >= next_report) {
      next_report += report_every;
      const std::vector<double> window = good.take_latencies();
      attacked.insert(attacked.end(), window.begin(), window.end());
      std::string unexpected;
      for (const Tally& t : tallies) {
        unexpected += std::to_string(t.unexpected.load()) + " ";
      }
      double load = 0;
      std::ifstream("/proc/loadavg") >> load;
      load_max = std::max(load_max, load);
      std::printf("[ soak ] %-6.0f %5.1f %7.0f %7.0f %6.0f %6zu %8.2f %8.2f %5d %6d %6d %5d %s\n",
                  std::chrono::duration<double>(Clock::now() - start).count(), load,
                  rss_mb(kcached.pid()), rss_peak.load(),
                  testing::metric_sum(port, "kcache_http_connections", kGoodToken), window.size(),
                  testing::percentile(window, 0.5), testing::percentile(window, 0.99),
                  good.errors.load(), good.disk_full.load(), good.shed.load(),
                  good.succeeded.load(), unexpected.c_str());
      std::fflush(stdout);
    }
  }
  const std::vector<double> tail = good.take_latencies();
  attacked.insert(attacked.end(), tail.begin(), tail.end());
  const double evicted =
      testing::metric_sum(port, "kcache_http_connections_evicted_total", kGoodToken);
  const double refused =
      testing::metric_sum(port, "kcache_http_connections_refused_total", kGoodToken);
  const double header_timeouts =
      testing::metric_sum(port, "kcache_http_header_timeouts_total", kGoodToken);
  const double stalls = testing::metric_sum(port, "kcache_http_stall_timeouts_total", kGoodToken);
  const double no_space = testing::metric_sum(port, "kcache_store_no_space_total", kGoodToken);
  stop = true;
  for (std::thread& t : threads) {
    t.join();
  }
  // Slow heads: each connection opened is a run; ended by the server (a
  // header timeout, an eviction, a refusal at a cap) is the answer owed.
  tallies[kSlow].runs = slow_a->opened() + slow_b->opened();
  tallies[kSlow].expected = slow_a->ended() + slow_b->ended();
  tallies[kSlow].no_answer = tallies[kSlow].runs - tallies[kSlow].expected;
  const double slow_longest = std::max(slow_a->longest_life_s(), slow_b->longest_life_s());
  slow_a.reset();
  slow_b.reset();
  sampler.join();
  disk.release();
  const bool alive = !died && rss_mb(kcached.pid()) > 0;

  // The figures.
  const double p50 = testing::percentile(attacked, 0.5);
  const double p99 = testing::percentile(attacked, 0.99);
  const double p99_bound = std::max(4 * idle_p99, idle_p99 + (sanitized ? 200.0 : 50.0));
  std::printf("\n[ soak ] summary after %d s (kcached %s; host load average up to %.1f on %u "
              "cores)\n",
              seconds, alive ? "alive" : "DEAD", load_max, std::thread::hardware_concurrency());
  std::printf("| %-32s | %6s | %8s | %10s | %9s |\n", "attack", "runs", "expected", "unexpected",
              "no answer");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(34, '-').c_str(), std::string(8, '-').c_str(),
              std::string(10, '-').c_str(), std::string(12, '-').c_str(),
              std::string(11, '-').c_str());
  for (Tally& t : tallies) {
    std::printf("| %-32s | %6d | %8d | %10d | %9d |%s\n", t.name.c_str(), t.runs.load(),
                t.expected.load(), t.unexpected.load(), t.no_answer.load(),
                t.last_unexpected.empty() ? ""
                                          : (" last unexpected: " + t.last_unexpected).c_str());
  }
  std::printf("[ soak ] kcached RSS: idle %.0f MB, peak %.0f MB (bound %.0f MB)\n", rss_idle,
              rss_peak.load(), rss_bound);
  std::printf("[ soak ] good client: %zu calls; p50 %.2f ms, p99 %.2f ms (idle %.2f / %.2f ms; "
              "bound %.2f ms); %d puts acknowledged, %d refused 507 (disk full), %d shed 503 "
              "(Retry-After), %d gets, %d wrong, %d errors%s\n",
              attacked.size(), p50, p99, idle_p50, idle_p99, p99_bound, good.puts.load(),
              good.disk_full.load(), good.shed.load(), good.gets.load(), good.wrong.load(),
              good.errors.load(),
              good.errors > 0 ? (" (last: " + good.last_error() + ")").c_str() : "");
  std::printf("[ soak ] good jobs: %d submitted, %d succeeded, %d infrastructure (killed on every "
              "attempt), %d not stored (disk full; submitted again), %d other failures\n",
              good.submitted.load(), good.succeeded.load(), good.infrastructure.load(),
              good.store_full.load(), good.failed.load());
  std::printf("[ soak ] server: %.0f connections evicted, %.0f refused, %.0f header timeouts "
              "(slow heads lived <= %.1f s), %.0f stalled writes cut, %.0f no-space refusals; %llu "
              "MB of unauthenticated body taken\n",
              evicted, refused, header_timeouts, slow_longest, stalls, no_space,
              static_cast<unsigned long long>(body_bytes.load() / kMiB));

  EXPECT_TRUE(alive) << kcached.log().substr(0, 4000);
  EXPECT_LE(rss_peak.load(), rss_bound);
  EXPECT_LE(p99, p99_bound) << "idle p99 " << idle_p99 << " ms";
  EXPECT_EQ(good.wrong.load(), 0);
  EXPECT_LE(good.errors.load(), std::max(1, static_cast<int>(attacked.size() / 1000)))
      << good.last_error();
  EXPECT_EQ(good.failed.load(), 0)
      << "a job failed as the spec's fault: " << good.last_job_failure();
  for (Tally& t : tallies) {
    EXPECT_EQ(t.unexpected.load(), 0) << t.name << ": last " << t.last_unexpected;
  }
  ASSERT_TRUE(alive);

  // Restart, then read back every acknowledged write and compiled kernel.
  EXPECT_EQ(kcached.terminate(), 0);
  kcached.start();
  auto reader = connect(kcached, kGoodToken);
  int missing = 0, wrong = 0;
  const auto acknowledged = good.acknowledged();
  for (const auto& a : acknowledged) {
    auto res = reader->get(a.key);
    if (!res || !res->has_value()) {
      ++missing;
    } else if ((*res)->files.size() != 1 ||
               (*res)->files[0].data != testing::random_bytes(a.size, a.seed)) {
      ++wrong;
    }
  }
  int kernels_missing = 0, kernels_wrong = 0;
  const auto compiled = good.compiled();
  for (const int n : compiled) {
    auto res = reader->get("soak-kernel-" + std::to_string(n));
    if (!res || !res->has_value()) {
      ++kernels_missing;
    } else if (!is_kernel(**res, n)) {
      ++kernels_wrong;
    }
  }
  std::printf("[ soak ] after a restart: %zu acknowledged puts, %d missing, %d wrong; %zu "
              "compiled kernels, %d missing, %d wrong\n",
              acknowledged.size(), missing, wrong, compiled.size(), kernels_missing, kernels_wrong);
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(kernels_missing, 0);
  EXPECT_EQ(kernels_wrong, 0);
}

} // namespace
} // namespace kcache
