// TLS end to end (issue 14): a real kcached serving TLS with certificates made
// at test time, the C++ client, the CLI and raw OpenSSL clients against it.

#include "kcached_process.h"
#include "strong_token.h"
#include "tls_certs.h"

#include <kcache/client/client.h>
#include <kcache/service/config.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

namespace kcache {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace http = boost::beast::http;
using client::Client;
using client::ClientOptions;
using client::ErrorCode;
using testing::KcachedProcess;
using testing::TlsFiles;

std::unique_ptr<Client> make_client(const std::string& url, const std::string& ca_file,
                                    const std::string& cert = "", const std::string& key = "") {
  ClientOptions o;
  o.url = url;
  o.ca_file = ca_file;
  o.client_cert_file = cert;
  o.client_key_file = key;
  o.timeout = std::chrono::seconds(5);
  o.connect_timeout = std::chrono::seconds(2);
  o.retries = 0;
  o.down_backoff = std::chrono::milliseconds(0);
  auto c = Client::create(o);
  if (!c) {
    ADD_FAILURE() << c.error().message;
    return nullptr;
  }
  return std::move(*c);
}

std::vector<std::string> tls_args(const TlsFiles& f) {
  return {"--tls-cert", f.server_cert, "--tls-key", f.server_key, "--workers", "0"};
}

std::string https(const KcachedProcess& k, const std::string& host = "127.0.0.1") {
  return "https://" + host + ":" + std::to_string(k.port());
}

bool wait_for_log(const KcachedProcess& k, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (k.log().find(text) != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// One TLS handshake with a raw OpenSSL client limited to [min, max]; the error, or none.
boost::system::error_code handshake(int port, int min_version, int max_version,
                                    const std::string& ca_file) {
  asio::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), min_version);
  SSL_CTX_set_max_proto_version(ctx.native_handle(), max_version);
  // OpenSSL 3 refuses TLS 1.0/1.1 itself at the default security level: level 0
  // lets this client offer them, so the refusal seen is the server's.
  SSL_CTX_set_security_level(ctx.native_handle(), 0);
  SSL_CTX_set_cipher_list(ctx.native_handle(), "ALL:@SECLEVEL=0");
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(ssl::verify_peer);
  ssl::stream<asio::ip::tcp::socket> stream(io, ctx);
  boost::system::error_code ec;
  stream.next_layer().connect(
      {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
  if (!ec) {
    stream.handshake(ssl::stream_base::client, ec);
  }
  return ec;
}

class TlsTest : public ::testing::Test {
protected:
  testing::TempDir certs_;
  TlsFiles ca_ = testing::make_tls_files(certs_.path(), "main");
};

TEST_F(TlsTest, RoundTripFromTheCppClient) {
  // With compile workers, for a job over TLS.
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  KcachedProcess k({"--tls-cert", ca_.server_cert, "--tls-key", ca_.server_key, "--worker-binary",
                    release ? env : testing::built_binary("kcache-worker"), "--worker-memory",
                    release ? "4GiB" : "0"});
  EXPECT_NE(k.log().find("TLS"), std::string::npos) << k.log();
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto c = make_client(https(k, host), ca_.ca);
    ASSERT_TRUE(c);
    const std::string key = "tls-" + host;
    ASSERT_TRUE(c->put(key, {{"value", std::string(100000, 'x')}})) << host;
    auto got = c->get(key);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->files.at(0).data, std::string(100000, 'x'));
    const std::vector<std::string> keys = {key, "tls-missing"};
    auto batch = c->batch_get(keys);
    ASSERT_TRUE(batch) << batch.error().message;
    ASSERT_EQ(batch->size(), 2U);
    EXPECT_TRUE((*batch)[0].has_value());
    EXPECT_FALSE((*batch)[1].has_value());
    auto exists = c->exists(key);
    ASSERT_TRUE(exists);
    EXPECT_TRUE(*exists);
    auto stats = c->stats();
    ASSERT_TRUE(stats) << stats.error().message;
  }
  // A compile job submitted and its artifact fetched over TLS.
  auto c = make_client(https(k), ca_.ca);
  client::CompileRequest request;
  request.key = "kc1-tls-job";
  request.spec_json = R"({"backend": "cpp", "target": "x86-64-v2", "output": "shared",
    "options": ["-O1", "-std=c++20"],
    "source": {"name": "kernel.cpp", "text": "extern \"C\" int tls_job() { return 7; }"}})";
  request.wait_timeout = std::chrono::seconds(120);
  auto outcome = c->get_or_compile(request);
  ASSERT_TRUE(outcome) << outcome.error().message;
  ASSERT_EQ(outcome->kind, client::CompileOutcome::Kind::kCompiled)
      << (outcome->job ? outcome->job->error_message + outcome->job->log : "") << k.log();
  ASSERT_TRUE(outcome->artifact.has_value());
  auto listed = c->jobs();
  ASSERT_TRUE(listed) << listed.error().message;

  // The Unix socket stays plain.
  auto local = make_client("unix://" + k.unix_socket(), "");
  ASSERT_TRUE(local);
  auto got = local->get("tls-127.0.0.1");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(got->has_value());
}

TEST_F(TlsTest, BodiesAroundRecordAndWriteSizesRoundTripOnOneConnection) {
  // TlsStream encrypts up to 256 KiB per socket write and decrypts what one
  // read brings: sizes at the 16 KiB record edge and past several writes.
  KcachedProcess k(tls_args(ca_));
  auto c = make_client(https(k), ca_.ca);
  ASSERT_TRUE(c);
  std::mt19937 rng(14);
  for (const std::size_t size :
       {std::size_t{1}, std::size_t{16383}, std::size_t{16384}, std::size_t{16385},
        std::size_t{300} << 10, std::size_t{3} << 20}) {
    std::string value(size, '\0');
    for (char& ch : value) {
      ch = static_cast<char>(rng());
    }
    const std::string key = "tls-size-" + std::to_string(size);
    ASSERT_TRUE(c->put(key, {{"value", value}})) << size;
    for (int i = 0; i < 2; ++i) {
      auto got = c->get(key);
      ASSERT_TRUE(got) << size << ": " << got.error().message;
      ASSERT_TRUE(got->has_value()) << size;
      EXPECT_EQ((*got)->files.at(0).data, value) << size;
    }
  }
}

TEST_F(TlsTest, OrderlyCloseSendsCloseNotify) {
  KcachedProcess k(tls_args(ca_));
  // The server's: a request with Connection: close is answered, then
  // close_notify; a reader sees a clean end (eof), not a truncated stream.
  {
    asio::io_context io;
    ssl::context ctx(ssl::context::tls_client);
    ctx.load_verify_file(ca_.ca);
    ctx.set_verify_mode(ssl::verify_peer);
    ssl::stream<asio::ip::tcp::socket> stream(io, ctx);
    stream.next_layer().connect(
        {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(k.port())});
    stream.handshake(ssl::stream_base::client);
    http::request<http::empty_body> req{http::verb::get, "/healthz", 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(false);
    http::write(stream, req);
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    EXPECT_EQ(res.result_int(), 200U);
    std::array<char, 64> rest{};
    boost::system::error_code ec;
    EXPECT_EQ(stream.read_some(asio::buffer(rest), ec), 0U);
    EXPECT_EQ(ec, asio::error::eof) << ec.message();
  }
  // The client's: a raw TLS server answers one request and reads on; the
  // client, destroyed, ends its pooled connection with close_notify.
  asio::io_context io;
  ssl::context ctx(ssl::context::tls_server);
  ctx.use_certificate_chain_file(ca_.server_cert);
  ctx.use_private_key_file(ca_.server_key, ssl::context::pem);
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  boost::system::error_code server_end;
  std::thread server([&] {
    ssl::stream<asio::ip::tcp::socket> stream(io, ctx);
    acceptor.accept(stream.next_layer());
    stream.handshake(ssl::stream_base::server);
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::read(stream, buffer, req);
    http::response<http::string_body> res{http::status::not_found, 11};
    res.set(http::field::content_type, "application/json");
    res.body() = R"({"error": "not found"})";
    res.keep_alive(true);
    res.prepare_payload();
    http::write(stream, res);
    std::array<char, 64> rest{};
    (void)stream.read_some(asio::buffer(rest), server_end);
  });
  {
    auto c = make_client("https://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()),
                         ca_.ca);
    ASSERT_TRUE(c);
    auto got = c->get("anything");
    EXPECT_TRUE(got) << got.error().message;
  }
  server.join();
  EXPECT_EQ(server_end, asio::error::eof) << server_end.message();
}

TEST_F(TlsTest, CliOverHttps) {
  KcachedProcess k(tls_args(ca_));
  const std::string file = (certs_.path() / "payload").string();
  std::ofstream(file) << "cli over tls";
  const std::string kcache = testing::built_binary("kcache");
  std::string out;
  EXPECT_EQ(testing::run_command(
                {kcache, "--url", https(k), "--ca-file", ca_.ca, "put", "cli-key", file}, out),
            0)
      << out;
  EXPECT_EQ(
      testing::run_command({kcache, "--url", https(k), "--ca-file", ca_.ca, "get", "cli-key"}, out),
      0);
  EXPECT_EQ(out, "cli over tls");
  // The CA from the environment, as KCACHE_URL is read.
  EXPECT_EQ(
      testing::run_command({kcache, "stats"}, out,
                           {"KCACHE_URL=" + https(k, "localhost"), "KCACHE_CA_FILE=" + ca_.ca}),
      0)
      << out;
  // Without the CA (the system store does not know it): daemon unreachable.
  EXPECT_EQ(testing::run_command({kcache, "--url", https(k), "--timeout-ms", "3000", "stats"}, out),
            3);
}

TEST_F(TlsTest, PlainHttpAgainstTheTlsPortFailsCleanly) {
  KcachedProcess k(tls_args(ca_));
  auto c = make_client("http://127.0.0.1:" + std::to_string(k.port()), "");
  ASSERT_TRUE(c);
  const auto start = std::chrono::steady_clock::now();
  auto got = c->get("anything");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::kUnavailable) << got.error().message;
  EXPECT_LT(took, std::chrono::seconds(2)); // closed at once, not a hang to the deadline
  // The daemon goes on serving TLS clients.
  auto tls = make_client(https(k), ca_.ca);
  EXPECT_TRUE(tls->stats());
}

TEST_F(TlsTest, ServerCertificateFromAnUntrustedCaIsRefused) {
  KcachedProcess k(tls_args(ca_));
  const TlsFiles other = testing::make_tls_files(certs_.path(), "other");
  auto c = make_client(https(k), other.ca);
  ASSERT_TRUE(c);
  auto got = c->get("anything");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("certificate"), std::string::npos) << got.error().message;
  // No CA file: the system store, which does not know this CA either.
  auto system = make_client(https(k), "");
  ASSERT_TRUE(system);
  EXPECT_FALSE(system->get("anything"));
}

TEST_F(TlsTest, CertificateForAnotherNameIsRefused) {
  const TlsFiles elsewhere =
      testing::make_tls_files(certs_.path(), "elsewhere", "DNS:kcache.example.com");
  KcachedProcess k(tls_args(elsewhere));
  auto c = make_client(https(k), elsewhere.ca);
  auto got = c->get("anything");
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("certificate"), std::string::npos) << got.error().message;
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  auto args = tls_args(ca_);
  args.insert(args.end(), {"--tls-client-ca", ca_.ca});
  KcachedProcess k(args);
  auto anonymous = make_client(https(k), ca_.ca);
  auto refused = anonymous->get("anything");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable) << refused.error().message;

  const TlsFiles other = testing::make_tls_files(certs_.path(), "other");
  auto stranger = make_client(https(k), ca_.ca, other.client_cert, other.client_key);
  EXPECT_FALSE(stranger->get("anything"));

  auto member = make_client(https(k), ca_.ca, ca_.client_cert, ca_.client_key);
  ASSERT_TRUE(member->put("mtls", {{"value", "ok"}}));
  auto got = member->get("mtls");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(got->has_value());
}

TEST_F(TlsTest, SighupReloadsTheCertificateForNewConnectionsOnly) {
  // The served files are copies, replaced in place as an operator would.
  const std::string cert = (certs_.path() / "served.pem").string();
  const std::string key = (certs_.path() / "served.key").string();
  std::filesystem::copy_file(ca_.server_cert, cert);
  std::filesystem::copy_file(ca_.server_key, key);
  KcachedProcess k({"--tls-cert", cert, "--tls-key", key, "--workers", "0"});

  // Trusts only the first CA; its connection is open (pooled) before the reload.
  auto before = make_client(https(k), ca_.ca);
  ASSERT_TRUE(before->put("reload", {{"value", "v"}}));

  const TlsFiles next = testing::make_tls_files(certs_.path(), "next");
  std::filesystem::copy_file(next.server_cert, cert,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(next.server_key, key,
                             std::filesystem::copy_options::overwrite_existing);
  ::kill(k.pid(), SIGHUP);
  ASSERT_TRUE(wait_for_log(k, "reloaded TLS certificate")) << k.log();

  // The open keep-alive connection keeps working (a new one would fail: the
  // new certificate is from a CA this client does not trust).
  for (int i = 0; i < 3; ++i) {
    auto got = before->get("reload");
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_TRUE(got->has_value());
  }
  // New connections see the new certificate.
  EXPECT_FALSE(make_client(https(k), ca_.ca)->get("reload"));
  auto after = make_client(https(k), next.ca);
  auto got = after->get("reload");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_TRUE(got->has_value());

  // A reload that fails keeps the last good context and says why.
  std::ofstream(cert, std::ios::trunc) << "not a certificate";
  ::kill(k.pid(), SIGHUP);
  ASSERT_TRUE(wait_for_log(k, "TLS reload failed")) << k.log();
  EXPECT_TRUE(make_client(https(k), next.ca)->get("reload"));
  EXPECT_TRUE(before->get("reload")); // and the oldest connection still too
}

TEST_F(TlsTest, OnlyTls12AndLaterAreAccepted) {
  KcachedProcess k(tls_args(ca_));
  EXPECT_TRUE(handshake(k.port(), TLS1_VERSION, TLS1_1_VERSION, ca_.ca));
  EXPECT_FALSE(handshake(k.port(), TLS1_2_VERSION, TLS1_2_VERSION, ca_.ca));
  EXPECT_FALSE(handshake(k.port(), TLS1_3_VERSION, TLS1_3_VERSION, ca_.ca));
}

TEST_F(TlsTest, UnreadableCertificateStopsStartUp) {
  std::string out;
  const int rc =
      testing::run_command({"/bin/sh", "-c",
                            testing::built_binary("kcached") + " --listen 127.0.0.1:0 --data-dir " +
                                (certs_.path() / "data").string() + " --tls-cert " +
                                ca_.server_cert + " --tls-key /nonexistent/server.key 2>&1"},
                           out);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("/nonexistent/server.key"), std::string::npos) << out;
}

TEST_F(TlsTest, PlainNonLoopbackListenerWithTokensStopsStartUp) {
  const std::string config = (certs_.path() / "kcached.toml").string();
  std::ofstream(config) << "[[tokens]]\nname = \"ci\"\ntoken = \""
                        << testing::strong_token("tls-startup") << "\"\nrole = \"admin\"\n";
  ::chmod(config.c_str(), 0600);
  auto start = [&](const std::string& extra) {
    std::string out;
    const int rc = testing::run_command({"/bin/sh", "-c",
                                         testing::built_binary("kcached") + " --config " + config +
                                             " --data-dir " + (certs_.path() / "data").string() +
                                             " --workers 0 " + extra + " 2>&1"},
                                        out);
    return std::pair{rc, out};
  };
  const auto [rc, out] = start("--listen 0.0.0.0:0");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("allow_plain_http"), std::string::npos) << out;
  EXPECT_NE(out.find("[tls]"), std::string::npos) << out;

  // The same through the config check: loopback, TLS or the explicit
  // opt-out each let it start.
  service::ServiceConfig c;
  c.listen = "0.0.0.0:7070";
  c.tokens.resize(1);
  EXPECT_FALSE(service::check_transport_security(c));
  c.listen = "[::]:7070";
  EXPECT_FALSE(service::check_transport_security(c));
  c.listen = "10.1.2.3:7070";
  EXPECT_FALSE(service::check_transport_security(c));
  for (const char* loopback : {"127.0.0.1:7070", "[::1]:7070", "127.9.9.9:0"}) {
    c.listen = loopback;
    EXPECT_TRUE(service::check_transport_security(c)) << loopback;
  }
  c.listen = "0.0.0.0:7070";
  c.allow_plain_http = true;
  EXPECT_TRUE(service::check_transport_security(c));
  c.allow_plain_http = false;
  c.tls.cert_file = ca_.server_cert;
  c.tls.key_file = ca_.server_key;
  EXPECT_TRUE(service::check_transport_security(c));
  c.tls.key_file.clear();
  EXPECT_FALSE(service::check_transport_security(c)); // half a [tls] table
  c.tokens.clear();
  c.tls = {};
  EXPECT_TRUE(service::check_transport_security(c)); // no tokens: nothing to leak
}

} // namespace
} // namespace kcache
