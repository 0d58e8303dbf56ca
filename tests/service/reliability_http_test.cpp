// Issue 13's HTTP rows, as attacks on a real kcached: bodies without a token,
// slow request heads against a connection cap, and fetchers that never read.
// Each asserts the "must be" column: no crash, kcached's RSS under a stated
// bound, and a well-behaved client's latency measured in the same run.

#include "http_attacks.h"
#include "kcached_process.h"
#include "process_memory.h"
#include "random_bytes.h"
#include "strong_token.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kcache {
namespace {

using testing::KcachedProcess;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

using testing::connect_from;
using testing::kSanitized;
using testing::percentile;
using testing::read_response;
using testing::rss_mb;
using testing::send_all;
using testing::SlowHeaders;
using testing::status_of;

// ASan's shadow and quarantine hold freed memory: RSS bounds are looser there.
constexpr double kRssSlackMb = kSanitized ? 400.0 : 100.0;

const std::string kReadToken = testing::strong_token("reader");
const std::string kWriteToken = testing::strong_token("writer");
const std::string kDigest(64, 'a');
// What a streamed response of one chunked file reserves of send_memory: the
// largest piece it holds, a chunk (artifact_body.cpp).
constexpr double kStreamWindowMb = 1.0;

// A config file with a reader and a writer token, in `dir`.
std::string token_config(const testing::TempDir& dir) {
  std::string path = (dir.path() / "tokens.toml").string();
  std::ofstream(path) << "[[tokens]]\ntoken = \"" << kReadToken << "\"\nrole = \"read\"\n"
                      << "[[tokens]]\ntoken = \"" << kWriteToken << "\"\nrole = \"write\"\n";
  // Plaintext tokens only in a file others cannot read (kcached refuses it otherwise).
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  return path;
}

// One request on a fresh connection, as a well-behaved client: its status
// and how long it took.
std::pair<int, double> timed_request(int port, const std::string& request) {
  const auto start = Clock::now();
  const int fd = connect_from(port);
  int status = 0;
  if (fd >= 0) {
    if (send_all(fd, request)) {
      status = status_of(read_response(fd));
    }
    close(fd);
  }
  return {status, std::chrono::duration<double, std::milli>(Clock::now() - start).count()};
}

std::string good_request() {
  return std::string("GET /v1/ac/no-such-key HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ") +
         kReadToken + "\r\nConnection: close\r\n\r\n";
}

// A well-behaved client's latencies over `duration`; any status but 404
// (the key is missing) counts as a failure.
struct Probe {
  std::vector<double> ms;
  int failures = 0;
};
Probe probe(int port, std::chrono::milliseconds duration) {
  Probe out;
  const auto end = Clock::now() + duration;
  while (Clock::now() < end) {
    const auto [status, ms] = timed_request(port, good_request());
    out.ms.push_back(ms);
    out.failures += status == 404 ? 0 : 1;
    std::this_thread::sleep_for(5ms);
  }
  return out;
}

double metric(int port, const std::string& name) {
  return testing::metric_sum(port, name, kReadToken);
}

// Row 1: 500 MB bodies without a token are refused on their head; bodies
// with one are held under the body memory budget.
TEST(ReliabilityHttp, BodiesWithoutATokenAreRefusedBeforeTheBody) {
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--body-memory", "64MiB",
                          "--max-body-bytes", "48MiB"});
  const double rss_before = rss_mb(kcached.pid());
  const std::string head =
      "PUT /v1/cas/" + kDigest + " HTTP/1.1\r\nHost: t\r\nContent-Length: 524288000\r\n\r\n";

  // The 401 arrives after the head alone; the bodies then stream in and are dropped.
  std::vector<std::thread> attackers;
  attackers.reserve(3);
  std::atomic<std::uint64_t> sent{0};
  std::atomic<int> early_401{0};
  for (int i = 0; i < 3; ++i) {
    attackers.emplace_back([&] {
      const testing::BodyAttack attack = testing::stream_body(kcached.port(), head, 500);
      early_401 += attack.early_status == 401 ? 1 : 0;
      sent += attack.sent;
    });
  }
  double rss_peak = rss_before;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done) {
      rss_peak = std::max(rss_peak, rss_mb(kcached.pid()));
      std::this_thread::sleep_for(20ms);
    }
  });
  for (auto& t : attackers) {
    t.join();
  }
  done = true;
  sampler.join();
  EXPECT_EQ(early_401, 3) << "the 401 must come before the body";
  EXPECT_LT(rss_peak - rss_before, kSanitized ? 100.0 : 32.0)
      << "RSS " << rss_before << " -> " << rss_peak << " MB; " << sent / (1 << 20)
      << " MB of body were sent";
  std::printf("[ figures ] no-token bodies: 401 after the head on %d/3; RSS %.0f -> %.0f MB while "
              "%llu MB were sent\n",
              early_401.load(), rss_before, rss_peak,
              static_cast<unsigned long long>(sent / (1 << 20)));

  // With a token: a body over max_body_bytes is refused on its head...
  const std::string auth = std::string("Authorization: Bearer ") + kWriteToken + "\r\n";
  int fd = connect_from(kcached.port());
  send_all(fd, "PUT /v1/cas/" + kDigest + " HTTP/1.1\r\nHost: t\r\n" + auth +
                   "Content-Length: 60000000\r\n\r\n");
  EXPECT_EQ(status_of(read_response(fd)), 413);
  close(fd);
  // ...a wrong role gets 403 the same way...
  fd = connect_from(kcached.port());
  send_all(fd, "PUT /v1/cas/" + kDigest + " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " +
                   kReadToken + "\r\nContent-Length: 1000000\r\n\r\n");
  EXPECT_EQ(status_of(read_response(fd)), 403);
  close(fd);
  // ...and two 40 MB bodies do not fit a 64 MiB budget: the second gets 503
  // with Retry-After while the first is still being sent; Expect gets 100.
  // (An action record's JSON body is held in memory; CAS and artifact uploads
  // this large would be spooled to disk: reliability_upload_test.cpp.)
  const std::string record_put = "PUT /v1/ac/reliability-budget HTTP/1.1\r\nHost: t\r\n";
  const int first = connect_from(kcached.port());
  send_all(first, record_put + auth + "Expect: 100-continue\r\nContent-Length: 40000000\r\n\r\n");
  EXPECT_EQ(status_of(read_response(first)), 100);
  const int second = connect_from(kcached.port());
  send_all(second, record_put + auth + "Content-Length: 40000000\r\n\r\n");
  const std::string busy = read_response(second);
  EXPECT_EQ(status_of(busy), 503) << busy;
  EXPECT_NE(busy.find("Retry-After: 1"), std::string::npos);
  close(second);
  // The first one's body (not a JSON record) then gets its 400.
  send_all(first, std::string(40000000, 'y'));
  EXPECT_EQ(status_of(read_response(first, 10000ms)), 400);
  close(first);
  EXPECT_GE(metric(kcached.port(), "kcache_http_budget_refusals_total"), 1);
  EXPECT_GE(metric(kcached.port(), "kcache_http_rejected_before_body_total"), 5);
  EXPECT_EQ(metric(kcached.port(), "kcache_http_body_bytes_buffered"), 0);
  EXPECT_TRUE(kcached.running());
}

void slow_header_attack(const std::vector<std::string>& args, const char* what) {
  testing::TempDir config_dir;
  std::vector<std::string> all = {"--config", token_config(config_dir), "--max-connections",
                                  "200",      "--header-timeout-s",     "2"};
  all.insert(all.end(), args.begin(), args.end());
  KcachedProcess kcached(all);
  probe(kcached.port(), 300ms); // warm up
  const Probe idle = probe(kcached.port(), 2s);
  Probe attacked;
  double longest = 0;
  {
    SlowHeaders attack(kcached.port(), "127.0.0.2", 300);
    std::this_thread::sleep_for(1500ms); // every slot taken
    attacked = probe(kcached.port(), 5s);
    longest = attack.longest_life_s();
  }
  const double idle_p99 = percentile(idle.ms, 0.99);
  const double attacked_p99 = percentile(attacked.ms, 0.99);
  std::printf("[ figures ] slow heads (%s): well-behaved client %zu requests, %d failed; p99 "
              "%.2f ms idle, %.2f ms under attack; slow connections lived <= %.1f s; header "
              "timeouts %.0f, refused %.0f, evicted %.0f\n",
              what, attacked.ms.size(), attacked.failures, idle_p99, attacked_p99, longest,
              metric(kcached.port(), "kcache_http_header_timeouts_total"),
              metric(kcached.port(), "kcache_http_connections_refused_total"),
              metric(kcached.port(), "kcache_http_connections_evicted_total"));
  EXPECT_EQ(idle.failures, 0);
  EXPECT_EQ(attacked.failures, 0) << "of " << attacked.ms.size();
  // 2x of idle, with a floor: on loopback idle p99 is a fraction of a
  // millisecond, and a shared 2-core CI machine running the attacker, the
  // server and others' builds adds more noise than that. Under ASan every
  // accept and refusal costs several times more: the floor is wider there
  // (a 40 ms floor failed at 49.7 ms on a loaded CI run). Starvation, what
  // this guards against, would cost a slow head's header_timeout: seconds.
  EXPECT_LE(attacked_p99, std::max(2 * idle_p99, idle_p99 + (kSanitized ? 250.0 : 25.0)));
  EXPECT_LE(longest, 4.0) << "a slow head lives about header_timeout";
  EXPECT_GE(metric(kcached.port(), "kcache_http_header_timeouts_total") +
                metric(kcached.port(), "kcache_http_connections_evicted_total"),
            1);
  EXPECT_TRUE(kcached.running());
}

// Row 2: 300 connections sending heads at 1 byte/s against 200 slots.
TEST(ReliabilityHttp, SlowHeadersPerPeerCap) {
  slow_header_attack({"--max-connections-per-peer", "100"}, "per-peer cap 100");
}

TEST(ReliabilityHttp, SlowHeadersGiveWayToAdmittedClients) {
  // No per-peer cap: the attacker fills every slot, and new connections take
  // the slots of the oldest that never sent an admitted request.
  slow_header_attack({"--max-connections-per-peer", "0"}, "no per-peer cap");
}

// Row 3: 100 connections fetching a 20 MB artifact and never reading.
TEST(ReliabilityHttp, FetchersThatDoNotReadAreBounded) {
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--send-memory", "64MiB",
                          "--stall-timeout-s", "3", "--memory-capacity", "64MiB"});
  client::ClientOptions options;
  options.url = kcached.url();
  options.token = kWriteToken;
  auto writer = client::Client::create(options);
  ASSERT_TRUE(writer.has_value());
  const std::vector<client::File> files = {{"big.bin", std::string(20 << 20, '\x5a')}};
  ASSERT_TRUE((*writer)->put("kc-big", files).has_value());
  std::this_thread::sleep_for(1500ms); // a trim after the put's large frees
  const double rss_before = rss_mb(kcached.pid());

  const std::string get = std::string("GET /v1/artifacts/kc-big HTTP/1.1\r\nHost: t\r\n") +
                          "Authorization: Bearer " + kReadToken + "\r\n\r\n";
  const std::vector<int> fds = testing::open_non_readers(kcached.port(), "127.0.0.3", get, 100);
  ASSERT_EQ(fds.size(), 100U);
  double rss_peak = std::max(rss_before, rss_mb(kcached.pid()));
  // While they hang on: a well-behaved client still gets small answers fast.
  const Probe during = probe(kcached.port(), 1s);
  // ...and, from another address, the large artifact itself: the stalled
  // readers of 127.0.0.3 hold at most their address's share of send_memory.
  client::ClientOptions read_options = options;
  read_options.token = kReadToken;
  read_options.timeout = 10s;
  auto fetcher = client::Client::create(read_options);
  ASSERT_TRUE(fetcher.has_value());
  auto fetched_during = (*fetcher)->get("kc-big");
  EXPECT_TRUE(fetched_during.has_value() && fetched_during->has_value())
      << (fetched_during ? "a miss" : fetched_during.error().message);
  for (int i = 0; i < 20; ++i) {
    rss_peak = std::max(rss_peak, rss_mb(kcached.pid()));
    std::this_thread::sleep_for(50ms);
  }
  const double sends = metric(kcached.port(), "kcache_http_send_bytes_in_flight");
  // The stall timeout ends the non-readers; the memory goes back.
  std::this_thread::sleep_for(4500ms);
  const double stalls = metric(kcached.port(), "kcache_http_stall_timeouts_total");
  for (const int fd : fds) {
    close(fd);
  }
  std::this_thread::sleep_for(1500ms);
  // A well-behaved fetch of the artifact after the attack, then the RSS kept.
  options.token = kReadToken;
  auto reader = client::Client::create(options);
  ASSERT_TRUE(reader.has_value());
  auto got = (*reader)->get("kc-big");
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->files, files);
  std::this_thread::sleep_for(1500ms);
  const double rss_after = rss_mb(kcached.pid());
  std::printf("[ figures ] 100 non-reading fetchers of 20 MB: RSS %.0f -> peak %.0f -> %.0f MB "
              "after; %.0f MB in flight at most (budget 64 MiB); %.0f stalled writes cut; "
              "well-behaved p50 %.2f ms, p99 %.2f ms, %d failed\n",
              rss_before, rss_peak, rss_after, sends / (1 << 20), stalls,
              percentile(during.ms, 0.5), percentile(during.ms, 0.99), during.failures);
  EXPECT_LE(sends, 64.0 * (1 << 20) + (20 << 20));
  // The budget, plus the responses being built before it filled: each of the
  // 4 I/O threads holds two copies of the value (store read, encoding).
  EXPECT_LT(rss_peak - rss_before, 64 + 4 * 2 * 20 + kRssSlackMb);
  // Stored values are read and encoded on the I/O threads: a small request
  // may wait behind the few that were let in before the budget filled.
  EXPECT_LT(percentile(during.ms, 0.5), kSanitized ? 50.0 : 10.0);
  EXPECT_LT(percentile(during.ms, 0.99), kSanitized ? 3000.0 : 1000.0);
  // What stays: the memory tier's read-through copy of the value, allocator slack.
  EXPECT_LT(rss_after - rss_before, kSanitized ? 300.0 : 100.0);
  EXPECT_GE(stalls, 1);
  EXPECT_EQ(during.failures, 0);
  EXPECT_TRUE(kcached.running());
}

// Row 3 with the default send budget, which lets every non-reader in: the
// artifact's file is stored as chunks and streamed (artifact_body.h), so each
// stalled connection holds one chunk, not the 20 MB (903 MB peak before).
TEST(ReliabilityHttp, StreamedArtifactsHoldAChunkPerNonReader) {
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--stall-timeout-s", "3"});
  client::ClientOptions options;
  options.url = kcached.url();
  options.token = kWriteToken;
  options.timeout = 30s;
  auto writer = client::Client::create(options);
  ASSERT_TRUE(writer.has_value());
  const std::vector<client::File> files = {{"big.bin", testing::random_bytes(20 << 20, 13)}};
  ASSERT_TRUE((*writer)->put("kc-streamed", files).has_value());
  options.token = kReadToken;
  auto reader = client::Client::create(options);
  ASSERT_TRUE(reader.has_value());
  ASSERT_TRUE((*reader)->get("kc-streamed").has_value()); // chunks now in the memory tier too
  std::this_thread::sleep_for(1500ms);                    // a trim after the large frees
  const double rss_before = rss_mb(kcached.pid());

  const std::string get = std::string("GET /v1/artifacts/kc-streamed HTTP/1.1\r\nHost: t\r\n") +
                          "Authorization: Bearer " + kReadToken + "\r\n\r\n";
  const std::vector<int> fds = testing::open_non_readers(kcached.port(), "127.0.0.4", get, 100);
  ASSERT_EQ(fds.size(), 100U);
  double rss_peak = std::max(rss_before, rss_mb(kcached.pid()));
  double sends = 0;
  for (int i = 0; i < 40; ++i) {
    rss_peak = std::max(rss_peak, rss_mb(kcached.pid()));
    sends = std::max(sends, metric(kcached.port(), "kcache_http_send_bytes_in_flight"));
    std::this_thread::sleep_for(50ms);
  }
  // Meanwhile a reader from another address gets the whole artifact.
  auto during = (*reader)->get("kc-streamed");
  ASSERT_TRUE(during.has_value() && during->has_value());
  EXPECT_EQ((*during)->files, files);
  std::this_thread::sleep_for(4500ms); // the stall timeout ends the non-readers
  const double stalls = metric(kcached.port(), "kcache_http_stall_timeouts_total");
  const double refused = metric(kcached.port(), "kcache_http_budget_refusals_total");
  for (const int fd : fds) {
    close(fd);
  }
  std::this_thread::sleep_for(1500ms);
  const double rss_after = rss_mb(kcached.pid());
  std::printf("[ figures ] 100 non-reading fetchers of a streamed 20 MB artifact: RSS %.0f -> "
              "peak %.0f -> %.0f MB after; %.0f MB reserved in flight at most; %.0f stalled "
              "writes cut; %.0f refused\n",
              rss_before, rss_peak, rss_after, sends / (1 << 20), stalls, refused);
  // All 100 were served (none refused), each counted for its window, not the artifact.
  EXPECT_EQ(refused, 0);
  EXPECT_GE(stalls, 100);
  EXPECT_LE(sends, 100.0 * (kStreamWindowMb + 0.1) * (1 << 20));
  // One chunk (1 MiB) held per stalled connection, plus slack.
  EXPECT_LT(rss_peak - rss_before, 100 * 1.5 + kRssSlackMb);
  EXPECT_LT(rss_after - rss_before, kSanitized ? 300.0 : 100.0);
  EXPECT_TRUE(kcached.running());
}

} // namespace
} // namespace kcache
