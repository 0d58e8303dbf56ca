// signature_bench: what signed action records cost (issue 14). In one run:
//   sign     a record as kcached stores it (Ed25519 over the canonical message)
//   verify   a record as the shared-tier check does, on a first read (parse
//            the JSON + Ed25519) and on a repeat read (the per-process
//            verified-signature cache: SHA-256 of the record's bytes + lookup)
//   e2e      a client's end-to-end check of a 64 KiB artifact (record + the
//            file's SHA-256), first and repeat
// against the latency of a 64 KiB hit measured in the same run:
//   http     a trainer's get of a 64 KiB artifact from kcached (libkcache,
//            keep-alive; served from kcached's local tiers: no check at all),
//            and the same get with verify_signatures on (repeat reads)
//   shared   an ArtifactStore get of a 64 KiB artifact that comes from Redis
//            through the signature check: a first read (the cache cleared
//            before each call) and a repeat read (cached)
// Each run's figure is the median call; the result is the median of 3 runs,
// every run printed.
//
//   build/release/bench/signature_bench [--iterations N]

#include "kcached_process.h"
#include "redis_server.h"

#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>
#include <kcache/client/verify.h>
#include <kcache/protocol/record_signature.h>
#include <kcache/protocol/verified_signature_cache.h>
#include <kcache/storage/artifact_store.h>
#include <kcache/storage/record_signer.h>
#include <kcache/storage/store_factory.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kHitBytes = 64 << 10;
constexpr int kRuns = 3;

std::string payload(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) {
    c = static_cast<char>(rng() & 0xFF);
  }
  return out;
}

// A record as a compile job stores it: a binary, a log, the job's metadata.
kcache::storage::ActionRecord typical_record(const std::string& key) {
  kcache::storage::ActionRecord r;
  r.key = key;
  r.producer = "kcache-worker@node-17";
  r.writer = "team-a-ci";
  r.created_ms = 1'763'000'000'000;
  for (auto [name, digest, size] : {std::tuple{"kernel.cubin", 'a', kHitBytes},
                                    std::tuple{"compile.log", 'b', std::size_t{812}}}) {
    kcache::storage::OutputRef out;
    out.name = name;
    out.digest = std::string(64, digest);
    out.size = size;
    r.outputs.push_back(std::move(out));
  }
  r.metadata = {
      {"job", "j-000123"},
      {"compile_key", "kcc-" + std::string(64, 'c')},
      {"backend", "cuda"},
      {"target", "sm_90a"},
      {"output", "cubin"},
      {"compile_ms", "1840"},
      {"lowered_names", R"({"gemm_kernel<128,128>":"_Z11gemm_kernelILi128ELi128EEvPKfS1_Pf"})"},
      {"toolchain", R"({"nvrtc":"12.4.131","driver":"550.54"})"}};
  return r;
}

// Median microseconds of one call of `fn` over `n` calls: each call timed
// alone, so a preempted call (a busy host) moves the median little.
template <typename Fn> double micros_per_call(int n, Fn&& fn) {
  std::vector<double> us(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    fn(i);
    us[static_cast<std::size_t>(i)] =
        std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  std::nth_element(us.begin(), us.begin() + n / 2, us.end());
  return us[static_cast<std::size_t>(n / 2)];
}

double median(std::array<double, kRuns> v) {
  std::sort(v.begin(), v.end());
  return v[kRuns / 2];
}

void print_row(const char* name, const std::array<double, kRuns>& runs) {
  std::printf("  %-44s", name);
  for (double r : runs) {
    std::printf(" %9.2f", r);
  }
  std::printf("   median %9.2f us\n", median(runs));
}

} // namespace

int main(int argc, char** argv) {
  int iterations = 2000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0) {
      iterations = std::max(10, std::atoi(argv[i + 1]));
    }
  }
  spdlog::set_level(spdlog::level::warn);

  const auto key = kcache::protocol::SigningKey::generate();
  if (!key) {
    std::fprintf(stderr, "%s\n", key.error().c_str());
    return 1;
  }
  kcache::protocol::TrustedKeys trusted;
  trusted.add(*key);
  const kcache::storage::KeyRecordSigner signer(*key);
  kcache::storage::ActionRecord record = typical_record("torch:team-a:bench");
  signer.sign(record);
  const std::string record_json = kcache::storage::record_to_json(record);

  // The shared tier: a real redis-server behind the checked, framed tier.
  kcache::testing::RedisServer redis;
  const std::vector<std::string> redis_only = {redis.url("namespace=sigbench")};
  const auto check = std::make_shared<kcache::protocol::TrustedKeys>();
  check->add(*key);
  const auto shared_cache = std::make_shared<kcache::protocol::VerifiedSignatureCache>();
  const kcache::storage::SignatureCheck signatures{check, nullptr, shared_cache};
  auto shared = kcache::storage::make_tiered_store(redis_only, {}, &signatures);
  if (!shared) {
    std::fprintf(stderr, "redis tier: %s\n", shared.error().message.c_str());
    return 1;
  }
  kcache::storage::ArtifactStore writer(*shared->store, &signer);
  const std::string artifact = payload(kHitBytes, 7);
  if (!writer.put("torch:team-a:hit", {{"kernel.cubin", artifact}}, "bench", record.metadata,
                  "team-a-ci")) {
    std::fprintf(stderr, "cannot store the artifact in redis\n");
    return 1;
  }
  kcache::storage::ArtifactStore reader(*shared->store);

  // The trainer's path: kcached on loopback, the artifact in its local tiers.
  kcache::testing::KcachedProcess kcached({"--log-level", "warn"});
  kcache::client::ClientOptions options;
  options.url = kcached.url();
  auto client = kcache::client::Client::create(options);
  if (!client || !(*client)->put("kc-sigbench", {{"kernel.cubin", artifact}})) {
    std::fprintf(stderr, "cannot reach kcached\n");
    return 1;
  }
  // A trainer that verifies end to end: it trusts kcached's public key.
  const auto kcached_key =
      kcache::protocol::SigningKey::load(kcached.dir().path() / "data" / "signing.pem");
  if (!kcached_key) {
    std::fprintf(stderr, "kcached's key: %s\n", kcached_key.error().c_str());
    return 1;
  }
  const std::string kcached_pub = (kcached.dir().path() / "kcached.pub").string();
  std::ofstream(kcached_pub) << kcached_key->public_pem();
  options.verify_signatures = true;
  options.trusted_keys = {kcached_pub};
  auto verifying = kcache::client::Client::create(options);
  if (!verifying) {
    std::fprintf(stderr, "verifying client: %s\n", verifying.error().message.c_str());
    return 1;
  }
  auto fetched = (*client)->get("kc-sigbench");
  if (!fetched || !fetched->has_value()) {
    std::fprintf(stderr, "cannot read the artifact back\n");
    return 1;
  }
  const kcache::client::Artifact& e2e_artifact = **fetched;
  kcache::protocol::TrustedKeys kcached_trusted;
  kcached_trusted.add(*kcached_key);
  kcache::protocol::VerifiedSignatureCache e2e_cache;
  kcache::protocol::VerifiedSignatureCache record_cache;

  const auto fields = kcache::protocol::record_fields_from_json(nlohmann::json::parse(record_json));
  std::array<double, kRuns> sign{}, verify{}, ed25519{}, cached{}, sha{}, e2e_first{}, e2e_repeat{},
      http{}, http_verified{}, shared_first{}, shared_repeat{};
  const int hits = std::max(10, iterations / 4);
  volatile unsigned char digest_sink = 0; // the hash is not optimized away
  auto must = [](bool ok) {
    if (!ok) {
      std::abort();
    }
  };
  for (int run = 0; run < kRuns; ++run) {
    sign[run] = micros_per_call(iterations, [&](int i) {
      kcache::storage::ActionRecord r = record;
      r.created_ms += i;
      signer.sign(r);
    });
    verify[run] = micros_per_call(iterations, [&](int) {
      must(kcache::protocol::verify_record_json("torch:team-a:bench", record_json, trusted)
               .has_value());
    });
    ed25519[run] = micros_per_call(
        iterations, [&](int) { must(trusted.verify(*fields, *record.signature).has_value()); });
    must(record_cache.verify("torch:team-a:bench", record_json, trusted).has_value());
    cached[run] = micros_per_call(iterations, [&](int) {
      must(record_cache.verify("torch:team-a:bench", record_json, trusted).has_value());
    });
    sha[run] = micros_per_call(iterations, [&](int) {
      digest_sink = kcache::cachekey::Sha256::of(e2e_artifact.files[0].data)[0];
    });
    e2e_first[run] = micros_per_call(iterations, [&](int) {
      must(kcache::client::verify_artifact(e2e_artifact, kcached_trusted).has_value());
    });
    e2e_repeat[run] = micros_per_call(iterations, [&](int) {
      must(kcache::client::verify_artifact(e2e_artifact, kcached_trusted, &e2e_cache).has_value());
    });
    http[run] = micros_per_call(hits, [&](int) {
      auto got = (*client)->get("kc-sigbench");
      must(got && got->has_value());
    });
    http_verified[run] = micros_per_call(hits, [&](int) {
      auto got = (*verifying)->get("kc-sigbench");
      must(got && got->has_value());
    });
    shared_first[run] = micros_per_call(hits, [&](int) {
      shared_cache->clear(); // a node's first read of this record
      auto got = reader.get("torch:team-a:hit");
      must(got && got->has_value());
    });
    shared_repeat[run] = micros_per_call(hits, [&](int) {
      auto got = reader.get("torch:team-a:hit");
      must(got && got->has_value());
    });
  }
  const auto stats = (*verifying)->verification();
  if (stats.rejected_total() != 0 || stats.cache_misses != 1) {
    std::fprintf(stderr, "unexpected client verification: %llu rejected, %llu cache misses\n",
                 static_cast<unsigned long long>(stats.rejected_total()),
                 static_cast<unsigned long long>(stats.cache_misses));
    return 1;
  }

  std::printf("signature_bench: Ed25519 (OpenSSL EVP), %d signs/verifies and %d hits per run\n",
              iterations, hits);
  std::printf("  %-44s %9s %9s %9s\n", "", "run 1", "run 2", "run 3");
  print_row("sign a record", sign);
  print_row("verify a record, first read (parse+Ed25519)", verify);
  print_row("  of which Ed25519 verify", ed25519);
  print_row("verify a record, repeat read (cached)", cached);
  print_row("SHA-256 of the 64 KiB file", sha);
  print_row("client e2e verify 64 KiB, first", e2e_first);
  print_row("client e2e verify 64 KiB, repeat (cached)", e2e_repeat);
  print_row("64 KiB hit, kcached over HTTP", http);
  print_row("64 KiB hit over HTTP, verify_signatures on", http_verified);
  print_row("64 KiB hit, Redis tier, checked, first read", shared_first);
  print_row("64 KiB hit, Redis tier, checked, repeat", shared_repeat);
  const auto pct = [](const std::array<double, kRuns>& part, const std::array<double, kRuns>& of) {
    return 100 * median(part) / median(of);
  };
  std::printf("shared tier, first read:  verify / hit        %5.1f %%  (goal <= 5 %%)\n",
              pct(verify, shared_first));
  std::printf("shared tier, repeat read: cached verify / hit %5.1f %%  (goal <= 5 %%)\n",
              pct(cached, shared_repeat));
  std::printf("client e2e, first read:   verify / HTTP hit   %5.1f %%\n", pct(e2e_first, http));
  std::printf("client e2e, repeat read:  verify / HTTP hit   %5.1f %%  (of which the file's "
              "SHA-256 %5.1f %%; the record %5.1f %%)\n",
              pct(e2e_repeat, http), pct(sha, http), pct(cached, http));
  return 0;
}
