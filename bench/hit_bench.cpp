// hit_bench: the trainer's hit path. N client threads read artifacts of 1 KiB,
// 64 KiB and 1 MiB from kcached (libkcache, keep-alive, one client per thread),
// and, as the anchor in the same run, the same payloads with hiredis GET from
// a redis-server (one connection per thread). Prints requests/s, p50 and p99,
// and the ratios.
//
// --tls: instead, the same payloads from two kcacheds in the same run, one
// plain and one serving TLS (certificates made with the openssl CLI), each
// client over its own keep-alive connection; the ratio is TLS / plain. Each
// row also gives the CPU time per request (clients + server) and AES-128-GCM's
// own cost for one payload on both ends, timed here: with clients and server
// on the same cores, plain CPU / (plain CPU + that cost) bounds the ratio any
// TLS stack reaches without offloading the cipher.
//
// --daemon-cpus N (with --tls): both kcacheds run N I/O threads on the first
// N CPUs this process may use and the clients on the others, so the clients' cipher
// and copies do not take the daemons' CPU: the throughput of one kcached
// whose trainers run on other hosts (loopback still charges part of the
// kernel's TCP work to the sender's core).
//
// --pipeline N: each client writes N GETs before it reads their N answers
// (hiredis's append for both Redis rows; for kcached's HTTP row a plain
// HTTP/1.1 socket instead of libkcache, which does not pipeline). req/s
// counts every GET; p50 and p99 are those of a whole batch of N.
//
//   build/release/bench/hit_bench [--seconds S] [--clients 1,16] [--sizes 1KiB,64KiB,1MiB]
//                                 [--pipeline N] [--tls [--daemon-cpus N]]

#include "kcached_process.h"
#include "raw_http.h"
#include "redis_server.h"
#include "tls_certs.h"

#include <kcache/client/client.h>
#include <kcache/protocol/units.h>

#include <hiredis/hiredis.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kKeys = 64;

struct Measurement {
  double rps = 0;
  double p50_us = 0;
  double p99_us = 0;
  std::uint64_t failures = 0;
  double cpu_us_per_request = 0;        // this process (the clients) + the server; 0: not measured
  double server_cpu_us_per_request = 0; // the server alone
};

// CPU time (user + system) a process has used, from /proc/PID/stat.
double process_cpu_us(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string field;
  long ticks = 0;
  for (int i = 1; i <= 15 && stat >> field; ++i) {
    if (i == 14 || i == 15) {
      ticks += std::atol(field.c_str());
    }
  }
  return static_cast<double>(ticks) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// This process's CPU time: the client threads (the rest of it sleeps).
double self_cpu_us() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(u.ru_utime) + us(u.ru_stime);
}

std::string payload(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) {
    c = static_cast<char>(rng() & 0xFF);
  }
  return out;
}

// Runs `clients` threads for `seconds`; each calls read(thread, i) and reports
// whether it got the expected bytes. One call makes `per_call` requests.
Measurement run(int clients, double seconds,
                const std::function<std::function<bool(int)>(int)>& make_reader, pid_t server = 0,
                int per_call = 1) {
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(clients));
  std::atomic<std::uint64_t> failures{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(clients));
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      auto read = make_reader(t);
      auto& lat = latencies[static_cast<std::size_t>(t)];
      lat.reserve(1 << 20);
      while (!go) {
        std::this_thread::yield();
      }
      for (int i = 0; !stop; ++i) {
        const auto start = Clock::now();
        if (!read(i)) {
          ++failures;
        }
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
    });
  }
  const double server_before = server > 0 ? process_cpu_us(server) : 0;
  const double cpu_before = self_cpu_us() + server_before;
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) {
    th.join();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const double server_used = server > 0 ? process_cpu_us(server) - server_before : 0;
  const double cpu_used = self_cpu_us() + server_before + server_used - cpu_before;
  std::vector<double> all;
  for (auto& l : latencies) {
    all.insert(all.end(), l.begin(), l.end());
  }
  std::sort(all.begin(), all.end());
  Measurement m;
  if (!all.empty()) {
    const double requests = static_cast<double>(all.size()) * per_call;
    m.rps = requests / elapsed;
    m.p50_us = all[all.size() / 2];
    m.p99_us = all[static_cast<std::size_t>(static_cast<double>(all.size() - 1) * 0.99)];
    if (server > 0) {
      m.cpu_us_per_request = cpu_used / requests;
      m.server_cpu_us_per_request = server_used / requests;
    }
  }
  m.failures = failures;
  return m;
}

// Waits until the process has used under 2% of a core for half a second.
void wait_until_idle(pid_t pid) {
  const double tick_us = 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  double before = process_cpu_us(pid);
  while (Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double now = process_cpu_us(pid);
    if (now - before <= tick_us) {
      return;
    }
    before = now;
  }
}

// AES-128-GCM (the suite kcached prefers) over `size` bytes in TLS records of
// 16 KiB, µs: the median of 31 timings of encrypting it, taken once on each
// end (decryption costs the same per byte).
double aes_gcm_both_ends_us(std::size_t size) {
  std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)> ctx(EVP_CIPHER_CTX_new(),
                                                                      &EVP_CIPHER_CTX_free);
  const unsigned char key[16] = {1}, iv[12] = {2};
  std::string in = payload(size, 1), out(size + 16, '\0');
  std::vector<double> times;
  for (int round = 0; round < 31; ++round) {
    const auto start = Clock::now();
    for (std::size_t at = 0; at < size; at += 16384) {
      const int n = static_cast<int>(std::min<std::size_t>(16384, size - at));
      int len = 0;
      unsigned char tag[16];
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, key, iv);
      EVP_EncryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len,
                        reinterpret_cast<const unsigned char*>(in.data() + at), n);
      EVP_EncryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + len, &len);
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, sizeof tag, tag);
    }
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return 2 * times[times.size() / 2];
}

// The CPUs this process may run on (a cpuset or taskset may have narrowed them).
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) {
        cpus.push_back(cpu);
      }
    }
  }
  return cpus;
}

// Binds the calling thread to `cpus`; the processes and threads it starts
// afterwards inherit that set.
void bind_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    CPU_SET(cpu, &set);
  }
  if (::sched_setaffinity(0, sizeof set, &set) != 0) {
    std::perror("sched_setaffinity");
    std::exit(1);
  }
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (int cpu : cpus) {
    out += (out.empty() ? "" : ",") + std::to_string(cpu);
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    out.push_back(item);
  }
  return out;
}

using Reader = std::function<std::function<bool(int)>(int)>;

// HTTP/1.1 by hand for --pipeline: a batch of GETs in one write, then their
// answers read in order (each a 200 whose parts body holds `size` bytes of file).
class PipelinedHttp {
public:
  explicit PipelinedHttp(int port) : fd_(kcache::testing::connect_from(port)) {
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~PipelinedHttp() { ::close(fd_); }
  PipelinedHttp(const PipelinedHttp&) = delete;
  PipelinedHttp& operator=(const PipelinedHttp&) = delete;

  bool get(const std::vector<std::string>& keys, std::size_t size) {
    std::string requests;
    for (const std::string& key : keys) {
      requests += "GET /v1/artifacts/" + key + " HTTP/1.1\r\nHost: bench\r\n\r\n";
    }
    if (fd_ < 0 || !kcache::testing::send_all(fd_, requests)) {
      return false;
    }
    bool ok = true;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      std::size_t head_end = 0;
      while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
        if (!fill()) {
          return false;
        }
      }
      const std::string_view head(in_.data(), head_end);
      const auto cl = head.find("Content-Length: ");
      const std::size_t length =
          cl == std::string_view::npos ? 0 : std::strtoul(head.data() + cl + 16, nullptr, 10);
      ok = ok && head.starts_with("HTTP/1.1 200") && length > size;
      while (in_.size() < head_end + 4 + length) {
        if (!fill()) {
          return false;
        }
      }
      in_.erase(0, head_end + 4 + length);
    }
    return ok;
  }

private:
  bool fill() {
    char buf[1 << 16];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      return false;
    }
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  std::string in_;
};

// The RESP port kcached logged at start ("RESP listening on ... (port N)").
int resp_port(const std::string& log) {
  const std::string mark = "RESP listening on ";
  const auto at = log.find(mark);
  const auto port = log.find("(port ", at == std::string::npos ? log.size() : at);
  if (port == std::string::npos) {
    std::fprintf(stderr, "no RESP port in kcached's log:\n%s\n", log.c_str());
    std::exit(1);
  }
  return std::atoi(log.c_str() + port + 6);
}

struct Row {
  std::string anchor_name, name;
  Measurement anchor, measured;
};

void print_header(const char* anchor, const char* name) {
  std::printf("\n%-8s %7s  %-8s %10s %9s %9s  %-8s %10s %9s %9s  %9s %9s\n", "size", "clients",
              anchor, "req/s", "p50 us", "p99 us", name, "req/s", "p50 us", "p99 us", "req/s x",
              "p99 x");
}

void print_row(std::size_t size, int clients, const Row& r) {
  std::printf("%-8s %7d  %-8s %10.0f %9.1f %9.1f  %-8s %10.0f %9.1f %9.1f  %8.2fx %8.2fx%s\n",
              kcache::protocol::format_size(size).c_str(), clients, r.anchor_name.c_str(),
              r.anchor.rps, r.anchor.p50_us, r.anchor.p99_us, r.name.c_str(), r.measured.rps,
              r.measured.p50_us, r.measured.p99_us, r.measured.rps / r.anchor.rps,
              r.measured.p99_us / r.anchor.p99_us,
              r.anchor.failures + r.measured.failures > 0 ? "  (failures!)" : "");
}

std::unique_ptr<kcache::client::Client> make_client(const std::string& url,
                                                    const std::string& ca_file = "") {
  kcache::client::ClientOptions o;
  o.url = url;
  o.ca_file = ca_file;
  o.timeout = std::chrono::seconds(10);
  auto c = kcache::client::Client::create(o);
  if (!c) {
    std::fprintf(stderr, "client: %s\n", c.error().message.c_str());
    std::exit(1);
  }
  return std::move(*c);
}

// kcached plain vs kcached over TLS, same payloads, same run.
// `daemon_cpus` > 0: the kcacheds on the first daemon_cpus of the allowed
// CPUs, the clients on the rest.
int tls_mode(double seconds, const std::vector<int>& client_counts,
             const std::vector<std::size_t>& sizes, unsigned daemon_cpus) {
  kcache::testing::TempDir certs;
  const kcache::testing::TlsFiles files = kcache::testing::make_tls_files(certs.path(), "bench");
  const std::vector<int> cpus = allowed_cpus();
  const auto cores = static_cast<unsigned>(std::max<std::size_t>(cpus.size(), 1));
  if (daemon_cpus > 0 && daemon_cpus >= cpus.size()) {
    std::fprintf(stderr, "--daemon-cpus %u leaves no CPU for the clients (%zu allowed here)\n",
                 daemon_cpus, cpus.size());
    return 2;
  }
  const std::vector<int> daemon_set(cpus.begin(), cpus.begin() + daemon_cpus);
  const std::vector<int> client_set(cpus.begin() + daemon_cpus, cpus.end());
  if (daemon_cpus > 0) {
    bind_to(daemon_set);
  }
  const std::string threads = std::to_string(daemon_cpus > 0 ? daemon_cpus : cores);
  // No compile workers: the hit path needs none, and their start-up would
  // share the cores being measured.
  kcache::testing::KcachedProcess plain(
      {"--log-level", "warn", "--threads", threads, "--workers", "0"});
  kcache::testing::KcachedProcess tls({"--log-level", "warn", "--threads", threads, "--workers",
                                       "0", "--tls-cert", files.server_cert, "--tls-key",
                                       files.server_key});
  const std::string tls_url = "https://127.0.0.1:" + std::to_string(tls.port());
  std::printf("kcached plain on port %d, kcached TLS on port %d (%u cores here)\n", plain.port(),
              tls.port(), cores);
  if (daemon_cpus > 0) {
    bind_to(client_set);
    std::printf("kcacheds on CPUs %s (%u I/O threads each), clients on CPUs %s\n",
                cpu_list(daemon_set).c_str(), daemon_cpus, cpu_list(client_set).c_str());
  }
  auto plain_loader = make_client(plain.url());
  auto tls_loader = make_client(tls_url, files.ca);
  print_header("plain", "tls");
  for (std::size_t size : sizes) {
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = "hit-" + std::to_string(size) + "-" + std::to_string(k);
      const std::string value = payload(size, static_cast<std::uint64_t>(k) * 7919 + size);
      if (!plain_loader->put(key, {{"value", value}}) ||
          !tls_loader->put(key, {{"value", value}})) {
        std::fprintf(stderr, "loading kcached failed\n");
        return 1;
      }
    }
    wait_until_idle(plain.pid());
    wait_until_idle(tls.pid());
    const double cipher_us = aes_gcm_both_ends_us(size);
    auto key_of = [size](int i) {
      return "hit-" + std::to_string(size) + "-" + std::to_string(i % kKeys);
    };
    auto reader = [&](const std::string& url, const std::string& ca) -> Reader {
      return [&, url, ca](int) {
        std::shared_ptr<kcache::client::Client> client = make_client(url, ca);
        return std::function<bool(int)>([client, key_of, size](int i) {
          auto got = client->get(key_of(i));
          return got && got->has_value() && (*got)->files.at(0).data.size() == size;
        });
      };
    };
    for (int clients : client_counts) {
      for (int i = 0; i < kKeys; ++i) { // warm-up: every key read once through each
        (void)plain_loader->get(key_of(i));
        (void)tls_loader->get(key_of(i));
      }
      Row r{"plain", "tls", run(clients, seconds, reader(plain.url(), ""), plain.pid()),
            run(clients, seconds, reader(tls_url, files.ca), tls.pid())};
      print_row(size, clients, r);
      const double plain_cpu = r.anchor.cpu_us_per_request;
      std::printf("%-8s %7d  cpu us/req: plain %.1f, tls %.1f; AES-128-GCM on both ends %.1f; "
                  "best tls/plain at plain's cpu %.2fx\n",
                  kcache::protocol::format_size(size).c_str(), clients, plain_cpu,
                  r.measured.cpu_us_per_request, cipher_us,
                  plain_cpu > 0 ? plain_cpu / (plain_cpu + cipher_us) : 0.0);
      // Trainers run on other hosts: the daemon's own CPU per request bounds
      // how many requests/s one node serves once clients are off its cores.
      const double server_plain = r.anchor.server_cpu_us_per_request;
      const double server_tls = r.measured.server_cpu_us_per_request;
      std::printf("%-8s %7d  server cpu us/req: plain %.1f, tls %.1f; server capacity tls/plain "
                  "%.2fx\n",
                  kcache::protocol::format_size(size).c_str(), clients, server_plain, server_tls,
                  server_tls > 0 ? server_plain / server_tls : 0.0);
    }
  }
  std::printf(
      "\nreq/s x = kcached over TLS req/s / kcached plain req/s (higher is better);\n"
      "p99 x = TLS p99 / plain p99 (lower is better). Clients and servers share this "
      "host; the\nhandshake is not measured (keep-alive connections, as trainers use).\n"
      "cpu us/req = (the clients' + the server's CPU time) / requests. With the cores "
      "shared and saturated,\nthroughput follows it, so plain / (plain + AES-GCM on both ends) "
      "bounds tls/plain\nfor any TLS stack that does the cipher in software (kTLS "
      "included).\nserver capacity = the server's plain CPU per request / its TLS CPU "
      "per request:\nthe TLS/plain throughput of one kcached whose clients are on other "
      "hosts.\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  std::vector<int> client_counts = {1, 16};
  std::vector<std::size_t> sizes = {1 << 10, 64 << 10, 1 << 20};
  int pipeline = 1;
  bool tls = false;
  unsigned daemon_cpus = 0;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tls") {
      tls = true;
      --i; // takes no value
      continue;
    }
    if (i + 1 >= argc) {
      break;
    }
    if (flag == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--clients") {
      client_counts.clear();
      for (const auto& c : split(argv[i + 1])) {
        client_counts.push_back(std::atoi(c.c_str()));
      }
    } else if (flag == "--daemon-cpus") {
      char* end = nullptr;
      const long n = std::strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0' || n < 1 || n > CPU_SETSIZE) {
        std::fprintf(stderr, "--daemon-cpus wants a count of CPUs, not '%s'\n", argv[i + 1]);
        return 2;
      }
      daemon_cpus = static_cast<unsigned>(n);
    } else if (flag == "--pipeline") {
      pipeline = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--sizes") {
      sizes.clear();
      for (const auto& s : split(argv[i + 1])) {
        sizes.push_back(kcache::protocol::parse_size(s).value());
      }
    }
  }

  if (tls) {
    return tls_mode(seconds, client_counts, sizes, daemon_cpus);
  }
  if (daemon_cpus > 0) {
    std::fprintf(stderr, "--daemon-cpus goes with --tls\n");
    return 2;
  }

  kcache::testing::RedisServer redis;
  // As many I/O threads as cores, like a production deployment.
  // Its RESP listener too: the same GET from the same hiredis client as
  // redis-server's, so that row's ratio compares the servers alone.
  // No compile workers: the hit path needs none, and their start-up would
  // share the cores being measured.
  kcache::testing::KcachedProcess kcached({"--log-level", "info", "--threads",
                                           std::to_string(std::thread::hardware_concurrency()),
                                           "--workers", "0", "--resp-listen", "127.0.0.1:0"});
  const int resp = resp_port(kcached.log());
  std::printf("redis-server on port %d, kcached on port %d, RESP port %d (%u cores here), "
              "pipeline depth %d\n",
              redis.port(), kcached.port(), resp, std::thread::hardware_concurrency(), pipeline);

  auto loader = make_client(kcached.url());
  redisContext* seed_ctx = redisConnect("127.0.0.1", redis.port());
  redisContext* resp_seed = redisConnect("127.0.0.1", resp);
  // Loads one size's payloads into both servers, then waits until kcached has
  // finished writing them out (RocksDB flushes would steal the measured cores).
  auto load = [&](std::size_t size) {
    for (int k = 0; k < kKeys; ++k) {
      const std::string key = "hit-" + std::to_string(size) + "-" + std::to_string(k);
      const std::string value = payload(size, static_cast<std::uint64_t>(k) * 7919 + size);
      if (!loader->put(key, {{"value", value}})) {
        std::fprintf(stderr, "loading kcached failed\n");
        std::exit(1);
      }
      freeReplyObject(
          redisCommand(seed_ctx, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
      auto* set = static_cast<redisReply*>(
          redisCommand(resp_seed, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
      if (set == nullptr || set->type == REDIS_REPLY_ERROR) {
        std::fprintf(stderr, "loading kcached over RESP failed: %s\n", set ? set->str : "");
        std::exit(1);
      }
      freeReplyObject(set);
    }
    wait_until_idle(kcached.pid());
  };

  std::printf("\n%-8s %7s  %-8s %10s %9s %9s  %-8s %10s %9s %9s  %9s %9s\n", "size", "clients",
              "anchor", "req/s", "p50 us", "p99 us", "kcached", "req/s", "p50 us", "p99 us",
              "req/s x", "p99 x");
  for (std::size_t size : sizes) {
    load(size);
    for (int clients : client_counts) {
      auto key_of = [size](int i) {
        return "hit-" + std::to_string(size) + "-" + std::to_string(i % kKeys);
      };
      // Warm-up: every key read once through each path.
      for (int i = 0; i < kKeys; ++i) {
        (void)loader->get(key_of(i));
      }
      auto hiredis_reader = [&](int port) -> Reader {
        return [&, port](int) {
          auto ctx = std::shared_ptr<redisContext>(redisConnect("127.0.0.1", port), &redisFree);
          return std::function<bool(int)>([ctx, key_of, size, pipeline](int i) {
            for (int j = 0; j < pipeline; ++j) {
              const std::string key = key_of(i * pipeline + j);
              redisAppendCommand(ctx.get(), "GET %b", key.data(), key.size());
            }
            bool ok = true;
            for (int j = 0; j < pipeline; ++j) {
              void* reply = nullptr;
              if (redisGetReply(ctx.get(), &reply) != REDIS_OK) {
                return false;
              }
              auto* r = static_cast<redisReply*>(reply);
              ok = ok && r->type == REDIS_REPLY_STRING && r->len == size;
              freeReplyObject(r);
            }
            return ok;
          });
        };
      };
      const Measurement redis_m = run(clients, seconds, hiredis_reader(redis.port()), 0, pipeline);
      const Measurement kcache_m =
          pipeline > 1
              ? run(
                    clients, seconds,
                    [&](int) {
                      auto http = std::make_shared<PipelinedHttp>(kcached.port());
                      return std::function<bool(int)>([http, key_of, size, pipeline](int i) {
                        std::vector<std::string> keys;
                        keys.reserve(static_cast<std::size_t>(pipeline));
                        for (int j = 0; j < pipeline; ++j) {
                          keys.push_back(key_of(i * pipeline + j));
                        }
                        return http->get(keys, size);
                      });
                    },
                    0, pipeline)
              : run(clients, seconds, [&](int) {
                  std::shared_ptr<kcache::client::Client> client = make_client(kcached.url());
                  return std::function<bool(int)>([client, key_of, size](int i) {
                    auto got = client->get(key_of(i));
                    return got && got->has_value() && (*got)->files.at(0).data.size() == size;
                  });
                });
      const Measurement resp_m = run(clients, seconds, hiredis_reader(resp), 0, pipeline);
      print_row(size, clients, Row{"redis", "kcached", redis_m, kcache_m});
      print_row(size, clients, Row{"redis", "kc-resp", redis_m, resp_m});
    }
  }
  redisFree(seed_ctx);
  redisFree(resp_seed);
  std::printf(
      "\nreq/s x = kcached req/s / redis-server GET req/s (higher is better);\n"
      "p99 x = kcached p99 / redis p99 (lower is better). Client and server share this host.\n"
      "kcached: HTTP through libkcache (with --pipeline: a plain HTTP/1.1 socket); kc-resp:\n"
      "kcached's RESP port through hiredis, as redis. --pipeline N: N GETs per write, req/s\n"
      "counts each, p50/p99 are a batch's.\n"
      "kcached uses every core (--threads = cores); redis-server is single-threaded.\n");
  return 0;
}
