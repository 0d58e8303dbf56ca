// Issue 13's large-upload row: uploads of hundreds of MB are spooled to disk
// as they arrive and stored a chunk at a time, so kcached's memory does not
// grow with their size; a blob stored as chunks is read back (streamed) by its
// whole digest. Bodies are generated as they are sent and compared as they are
// read, never held whole by the test either.
//
// The same for PUT /v1/artifacts (a record and its files in one parts body,
// every client's upload route): the body is spooled, its files parsed from
// the spool and stored a chunk at a time, and the C++ client reads them back.
//
// The default run sends 3 x KCACHE_UPLOAD_MB (200) MB at once; the soak label
// runs the issue's 3 x 500 MB (CMakeLists.txt).

#include "kcached_process.h"
#include "process_memory.h"
#include "raw_http.h"
#include "strong_token.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>
#include <kcache/protocol/wire.h>

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace kcache {
namespace {

using testing::KcachedProcess;
using namespace std::chrono_literals;

const std::string kWriteToken = testing::strong_token("writer");
constexpr std::size_t kBlock = 1 << 20;

std::uint64_t upload_mb() {
  const char* env = std::getenv("KCACHE_UPLOAD_MB");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 200;
}

// Block `index` of upload `seed`'s body: splitmix64, so every block differs
// (no chunk is stored once for all) and any block can be made again.
void make_block(std::uint64_t seed, std::uint64_t index, std::string& out) {
  out.resize(kBlock);
  std::uint64_t x = (seed << 40) ^ (index * 0x9e3779b97f4a7c15ULL);
  for (std::size_t i = 0; i < kBlock; i += 8) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::memcpy(&out[i], &z, 8);
  }
}

std::string digest_of(std::uint64_t seed, std::uint64_t megabytes) {
  cachekey::Sha256 hash;
  std::string block;
  for (std::uint64_t i = 0; i < megabytes; ++i) {
    make_block(seed, i, block);
    hash.update(block);
  }
  return cachekey::to_hex(hash.finish());
}

std::string auth() {
  return "Authorization: Bearer " + kWriteToken + "\r\n";
}

// PUT /v1/cas/<digest> with the generated body; sends `send_mb` of
// `megabytes` (fewer: a client that disconnects halfway). Returns the status.
int upload(int port, const std::string& digest, std::uint64_t seed, std::uint64_t megabytes,
           std::uint64_t send_mb) {
  const int fd = testing::connect_from(port);
  if (fd < 0) {
    return -1;
  }
  bool ok = testing::send_all(fd, "PUT /v1/cas/" + digest + " HTTP/1.1\r\nHost: t\r\n" + auth() +
                                      "Content-Length: " + std::to_string(megabytes * kBlock) +
                                      "\r\n\r\n");
  std::string block;
  for (std::uint64_t i = 0; ok && i < send_mb; ++i) {
    make_block(seed, i, block);
    ok = testing::send_all(fd, block);
  }
  const int status = send_mb < megabytes ? 0 : testing::status_of(testing::read_response(fd, 60s));
  close(fd);
  return status;
}

// GET /v1/cas/<digest>, comparing the body with the generator as it arrives.
// "" when it matched byte for byte; what differed otherwise.
std::string read_back(int port, const std::string& digest, std::uint64_t seed,
                      std::uint64_t megabytes) {
  const int fd = testing::connect_from(port);
  if (fd < 0 || !testing::send_all(fd, "GET /v1/cas/" + digest + " HTTP/1.1\r\nHost: t\r\n" +
                                           auth() + "Connection: close\r\n\r\n")) {
    return "cannot connect";
  }
  std::string got;
  std::string head;
  std::string block;
  std::uint64_t at = 0; // body bytes compared
  std::vector<char> buf(256 << 10);
  std::string why;
  while (why.empty()) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) {
      why = "timed out after " + std::to_string(at) + " body bytes";
      break;
    }
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      break;
    }
    std::string_view data(buf.data(), static_cast<std::size_t>(n));
    if (head.empty() || head.find("\r\n\r\n") == std::string::npos) {
      head.append(data);
      const auto end = head.find("\r\n\r\n");
      if (end == std::string::npos) {
        continue;
      }
      if (testing::status_of(head) != 200) {
        why = head;
        break;
      }
      got = head.substr(end + 4);
      head.resize(end + 4);
      data = got;
    }
    while (!data.empty() && why.empty()) {
      if (at % kBlock == 0) {
        make_block(seed, at / kBlock, block);
      }
      const std::size_t n_cmp = std::min<std::size_t>(data.size(), kBlock - at % kBlock);
      if (at / kBlock >= megabytes ||
          data.substr(0, n_cmp) != std::string_view(block).substr(at % kBlock, n_cmp)) {
        why = "bytes differ in block " + std::to_string(at / kBlock);
      }
      at += n_cmp;
      data.remove_prefix(n_cmp);
    }
  }
  close(fd);
  if (why.empty() && at != megabytes * kBlock) {
    why = "got " + std::to_string(at) + " body bytes of " + std::to_string(megabytes * kBlock);
  }
  return why;
}

// Runs upload(0), upload(1) and upload(2) at once; each must answer 201.
// Returns the seconds they took together.
double three_at_once(const std::function<int(std::uint64_t)>& upload) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> statuses(3);
  std::vector<std::thread> uploads;
  for (std::uint64_t i = 0; i < 3; ++i) {
    uploads.emplace_back([&, i] { statuses[i] = upload(i); });
  }
  for (auto& t : uploads) {
    t.join();
  }
  for (int s : statuses) {
    EXPECT_EQ(s, 201);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double hwm_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stod(line.substr(6)) / 1024.0;
    }
  }
  return -1;
}

// Files kcached holds open in `dir` (an unnamed spool file shows there as
// "<dir>/#<inode> (deleted)").
int open_files_in(pid_t pid, const std::filesystem::path& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const auto target = std::filesystem::read_symlink(fd.path(), ec).string();
    n += !ec && target.rfind(dir.string(), 0) == 0 ? 1 : 0;
  }
  return n;
}

int head_status(int port, const std::string& digest) {
  const int fd = testing::connect_from(port);
  testing::send_all(fd, "HEAD /v1/cas/" + digest + " HTTP/1.1\r\nHost: t\r\n" + auth() +
                            "Connection: close\r\n\r\n");
  const int status = testing::status_of(testing::read_response(fd));
  close(fd);
  return status;
}

std::string token_config(const testing::TempDir& dir) {
  std::string path = (dir.path() / "tokens.toml").string();
  std::ofstream(path) << "[[tokens]]\ntoken = \"" << kWriteToken << "\"\nrole = \"write\"\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  return path;
}

TEST(ReliabilityUpload, LargeUploadsAreSpooledToDiskAndReadBackByDigest) {
  const std::uint64_t mb = upload_mb();
  testing::TempDir config_dir;
  // A small memory tier: what it caches is not what this test measures.
  KcachedProcess kcached({"--config", token_config(config_dir), "--memory-capacity", "16MiB"});
  const auto spool_dir = kcached.dir().path() / "data" / "spool";
  // clang links ASan statically: a test built with it runs an ASan kcached.
  const bool sanitized = testing::kSanitized || testing::runs_sanitized(kcached.pid());
  // ASan's quarantine alone holds up to 256 MB of freed memory.
  const double bound_mb = sanitized ? 700.0 : 300.0;

  std::vector<std::string> digests(3);
  for (std::uint64_t i = 0; i < 3; ++i) {
    digests[i] = digest_of(i + 1, mb);
  }
  const double hwm_before = hwm_mb(kcached.pid());
  const double upload_s = three_at_once(
      [&](std::uint64_t i) { return upload(kcached.port(), digests[i], i + 1, mb, mb); });
  const double hwm_after = hwm_mb(kcached.pid());
  EXPECT_LT(hwm_after, bound_mb) << "kcached's peak RSS (VmHWM) " << hwm_before << " -> "
                                 << hwm_after << " MB";
  // The 201 leaves before the request (and its spool file) is dropped.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken) != 0) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken), 0);
  EXPECT_EQ(open_files_in(kcached.pid(), spool_dir), 0);
  EXPECT_TRUE(std::filesystem::is_empty(spool_dir));

  for (std::uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(head_status(kcached.port(), digests[i]), 200);
    EXPECT_EQ(read_back(kcached.port(), digests[i], i + 1, mb), "") << "upload " << i;
  }
  std::printf("[ figures ] 3 x %llu MB uploads%s: all 201 in %.1f s; kcached VmHWM %.0f -> %.0f MB "
              "(bound %.0f)\n",
              static_cast<unsigned long long>(mb), sanitized ? " (ASan)" : "", upload_s, hwm_before,
              hwm_after, bound_mb);
  EXPECT_TRUE(kcached.running());
}

TEST(ReliabilityUpload, ADisconnectHalfwayLeavesNoSpoolFileAndNoEntry) {
  const std::uint64_t mb = upload_mb();
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--memory-capacity", "16MiB"});
  const auto spool_dir = kcached.dir().path() / "data" / "spool";
  const std::string digest = digest_of(7, mb);
  upload(kcached.port(), digest, 7, mb, mb / 2);
  // The server sees the close on its next read.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         (open_files_in(kcached.pid(), spool_dir) != 0 ||
          testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken) != 0)) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(open_files_in(kcached.pid(), spool_dir), 0);
  EXPECT_EQ(testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken), 0);
  EXPECT_TRUE(std::filesystem::is_empty(spool_dir));
  EXPECT_EQ(head_status(kcached.port(), digest), 404);
  EXPECT_GE(testing::metric_sum(kcached.port(), "kcache_http_spooled_uploads_total", kWriteToken),
            1);
  EXPECT_TRUE(kcached.running());
}

// A body over the spool quota is refused on its head (503, Retry-After),
// before a byte of it is read.
TEST(ReliabilityUpload, AnUploadOverTheSpoolQuotaIsRefusedOnItsHead) {
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--spool-disk", "8MiB"});
  const int fd = testing::connect_from(kcached.port());
  testing::send_all(fd, "PUT /v1/cas/" + std::string(64, 'a') + " HTTP/1.1\r\nHost: t\r\n" +
                            auth() + "Content-Length: 20000000\r\n\r\n");
  const std::string answer = testing::read_response(fd);
  close(fd);
  EXPECT_EQ(testing::status_of(answer), 503) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(answer.find("upload spool"), std::string::npos) << answer;
  EXPECT_GE(testing::metric_sum(kcached.port(), "kcache_http_spool_refusals_total", kWriteToken),
            1);
}

// PUT /v1/artifacts/<key>: a record, a small log and a `megabytes` MB kernel
// generated from `seed` as it is sent (`send_mb` of it: fewer is a client
// that disconnects halfway). Returns the status (0 for a disconnect).
std::string artifact_prefix(std::uint64_t seed, std::uint64_t megabytes) {
  namespace wire = protocol::wire;
  const std::string record =
      R"({"producer":"reliability-upload","metadata":{"seed":")" + std::to_string(seed) + R"("}})";
  const std::string log = "log of upload " + std::to_string(seed);
  return wire::encode_parts_prefix(3) + wire::encode_part_head("record", record.size()) + record +
         wire::encode_part_head("log.txt", log.size()) + log +
         wire::encode_part_head("kernel.bin", megabytes * kBlock);
}

std::string artifact_key(std::uint64_t seed) {
  return "reliability-artifact-" + std::to_string(seed);
}

int upload_artifact(int port, std::uint64_t seed, std::uint64_t megabytes, std::uint64_t send_mb) {
  const int fd = testing::connect_from(port);
  if (fd < 0) {
    return -1;
  }
  const std::string prefix = artifact_prefix(seed, megabytes);
  bool ok = testing::send_all(
      fd, "PUT /v1/artifacts/" + artifact_key(seed) + " HTTP/1.1\r\nHost: t\r\n" + auth() +
              "Content-Type: application/x-kcache-parts\r\n"
              "Content-Length: " +
              std::to_string(prefix.size() + megabytes * kBlock) + "\r\n\r\n" + prefix);
  std::string block;
  for (std::uint64_t i = 0; ok && i < send_mb; ++i) {
    make_block(seed, i, block);
    ok = testing::send_all(fd, block);
  }
  const int status = send_mb < megabytes ? 0 : testing::status_of(testing::read_response(fd, 60s));
  close(fd);
  return status;
}

std::unique_ptr<client::Client> writer_client(int port) {
  client::ClientOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.token = kWriteToken;
  o.timeout = std::chrono::milliseconds(120000);
  auto c = client::Client::create(o);
  EXPECT_TRUE(c.has_value());
  return c ? std::move(*c) : nullptr;
}

// The artifact as the C++ client reads it, compared with the generator: ""
// when every file matched byte for byte.
std::string read_artifact_back(client::Client& c, std::uint64_t seed, std::uint64_t megabytes) {
  auto got = c.get(artifact_key(seed));
  if (!got) {
    return "get failed: " + got.error().message;
  }
  if (!got->has_value()) {
    return "a miss";
  }
  const auto& files = (*got)->files;
  if (files.size() != 2 || files[0].name != "log.txt" || files[1].name != "kernel.bin") {
    return "wrong files";
  }
  if (files[0].data != "log of upload " + std::to_string(seed)) {
    return "log.txt differs";
  }
  const std::string& kernel = files[1].data;
  if (kernel.size() != megabytes * kBlock) {
    return "kernel.bin has " + std::to_string(kernel.size()) + " bytes";
  }
  std::string block;
  for (std::uint64_t i = 0; i < megabytes; ++i) {
    make_block(seed, i, block);
    if (std::string_view(kernel).substr(i * kBlock, kBlock) != block) {
      return "kernel.bin differs in block " + std::to_string(i);
    }
  }
  return "";
}

// Spool files gone and their bytes given back (the 201 leaves before the
// request, and its spool file, is dropped).
void expect_spool_empty(const KcachedProcess& kcached) {
  const auto spool_dir = kcached.dir().path() / "data" / "spool";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         (open_files_in(kcached.pid(), spool_dir) != 0 ||
          testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken) != 0)) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(testing::metric_sum(kcached.port(), "kcache_http_spool_bytes", kWriteToken), 0);
  EXPECT_EQ(open_files_in(kcached.pid(), spool_dir), 0);
  EXPECT_TRUE(std::filesystem::is_empty(spool_dir));
}

TEST(ReliabilityUpload, LargeUploadsOfArtifactsAreSpooledAndReadBackByTheClient) {
  const std::uint64_t mb = upload_mb();
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--memory-capacity", "16MiB"});
  const bool sanitized = testing::kSanitized || testing::runs_sanitized(kcached.pid());
  const double bound_mb = sanitized ? 700.0 : 300.0;

  const double hwm_before = hwm_mb(kcached.pid());
  const double upload_s = three_at_once(
      [&](std::uint64_t i) { return upload_artifact(kcached.port(), i + 11, mb, mb); });
  const double hwm_after = hwm_mb(kcached.pid());
  EXPECT_LT(hwm_after, bound_mb) << "kcached's peak RSS (VmHWM) " << hwm_before << " -> "
                                 << hwm_after << " MB";
  expect_spool_empty(kcached);
  EXPECT_GE(testing::metric_sum(kcached.port(), "kcache_http_spooled_uploads_total", kWriteToken),
            3);

  // Read back one at a time (the client holds an artifact whole; kcached streams it).
  auto c = writer_client(kcached.port());
  ASSERT_NE(c, nullptr);
  for (std::uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(read_artifact_back(*c, i + 11, mb), "") << "upload " << i;
  }
  std::printf("[ figures ] 3 x %llu MB artifact uploads%s: all 201 in %.1f s; kcached VmHWM %.0f "
              "-> %.0f MB (bound %.0f)\n",
              static_cast<unsigned long long>(mb), sanitized ? " (ASan)" : "", upload_s, hwm_before,
              hwm_after, bound_mb);
  EXPECT_TRUE(kcached.running());
}

TEST(ReliabilityUpload, AnArtifactUploadCutHalfwayLeavesNoSpoolFileAndNoEntry) {
  const std::uint64_t mb = std::min<std::uint64_t>(upload_mb(), 64);
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir), "--memory-capacity", "16MiB"});
  upload_artifact(kcached.port(), 17, mb, mb / 2);
  expect_spool_empty(kcached);
  auto c = writer_client(kcached.port());
  ASSERT_NE(c, nullptr);
  auto exists = c->exists(artifact_key(17));
  ASSERT_TRUE(exists.has_value()) << exists.error().message;
  EXPECT_FALSE(*exists);
  EXPECT_GE(testing::metric_sum(kcached.port(), "kcache_http_spooled_uploads_total", kWriteToken),
            1);
  EXPECT_TRUE(kcached.running());
}

// The client's own put of a file over the spool threshold (spooled on the
// server, unchanged on the wire) reads back equal; a malformed spooled body
// is a 400 and stores nothing.
TEST(ReliabilityUpload, ClientPutsOfSpooledArtifactsRoundTripAndBadFramesAre400) {
  testing::TempDir config_dir;
  KcachedProcess kcached({"--config", token_config(config_dir)});
  auto c = writer_client(kcached.port());
  ASSERT_NE(c, nullptr);
  std::string big;
  std::string block;
  for (std::uint64_t i = 0; i < 9; ++i) {
    make_block(21, i, block);
    big += block;
  }
  const std::vector<client::File> files{
      {"a.cubin", big}, {"empty", ""}, {"b.ptx", big.substr(0, 3 << 20)}, {"c.txt", "c"}};
  ASSERT_TRUE(c->put("client-spooled", files).has_value());
  auto got = c->get("client-spooled");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE((*got)->files == files);
  EXPECT_GE(testing::metric_sum(kcached.port(), "kcache_http_spooled_uploads_total", kWriteToken),
            1);

  namespace wire = protocol::wire;
  std::string body = wire::encode_parts({{"record", "{}"}, {"a", big}});
  const std::vector<std::pair<std::string, std::string>> bad{
      {"truncated", body.substr(0, body.size() - 1)},
      {"trailing", body + "x"},
      {"no record", wire::encode_parts({{"a", big}})},
      {"record not JSON", wire::encode_parts({{"record", "{"}, {"a", big}})},
      {"bad magic", "KCPX" + body.substr(4)},
  };
  for (const auto& [what, bytes] : bad) {
    auto res = c->request(client::HttpMethod::kPut, "/v1/artifacts/bad-frame", bytes,
                          wire::kPartsContentType);
    ASSERT_TRUE(res.has_value()) << what << ": " << res.error().message;
    EXPECT_EQ(res->status, 400) << what << ": " << res->body;
  }
  auto exists = c->exists("bad-frame");
  ASSERT_TRUE(exists.has_value());
  EXPECT_FALSE(*exists);
  expect_spool_empty(kcached);
}

} // namespace
} // namespace kcache
