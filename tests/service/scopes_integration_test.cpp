// Issue 14's scope rows against a real kcached: tokens scoped to namespaces
// (a writer of team-a cannot write, delete or lease team-b's keys, named or
// kc1- by their manifest's namespace, nor kcc- keys), a read token cannot
// submit, a submit token's job publishes only under its compile key where it
// may not write the client's key (and is told so), and weak or placeholder
// tokens stop start-up. (That every route wants a token is
// scopes_routes_test.cpp's: it links the service's route table, and the
// client and the service are not linked together, their Boost.Beast
// configurations differ.)

#include "kcached_process.h"
#include "strong_token.h"

#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/sha256.h>
#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

namespace kcache {
namespace {

namespace fs = std::filesystem;
using client::Client;
using client::File;
using nlohmann::json;
using testing::KcachedProcess;
using testing::strong_token;

std::string sha256_line(const std::string& token) {
  return "sha256 = \"" + cachekey::to_hex(cachekey::Sha256::of(token)) + "\"\n";
}

// Digests in the config (world-readable is fine for those), and the old
// plaintext form in a private token_file.
std::string write_config(const testing::TempDir& dir) {
  const std::string token_file = (dir.path() / "tokens.toml").string();
  std::ofstream(token_file) << "[[tokens]]\nname = \"admin\"\ntoken = \"" << strong_token("admin")
                            << "\"\nrole = \"admin\"\n";
  fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write);
  const std::string path = (dir.path() / "kcached.toml").string();
  std::ofstream(path) << "token_file = \"" << token_file << "\"\n"
                      << "[[tokens]]\nname = \"team-a\"\n"
                      << sha256_line(strong_token("team-a"))
                      << "roles = { \"team-a*\" = \"admin\" }\n"
                      << "[[tokens]]\nname = \"team-b\"\n"
                      << sha256_line(strong_token("team-b"))
                      << "roles = { \"team-b*\" = \"admin\" }\n"
                      << "[[tokens]]\nname = \"reader\"\n"
                      << sha256_line(strong_token("reader")) << "role = \"read\"\n"
                      << "[[tokens]]\nname = \"writer\"\n"
                      << sha256_line(strong_token("writer")) << "role = \"write\"\n"
                      << "[[tokens]]\nname = \"ci\"\n"
                      << sha256_line(strong_token("ci")) << "role = \"submit\"\n"
                      << "[[tokens]]\nname = \"team-a-ci\"\n"
                      << sha256_line(strong_token("team-a-ci"))
                      << "roles = { \"team-a\" = \"write\", \"*\" = \"submit\" }\n";
  return path;
}

// scripts/test points KCACHE_WORKER_BINARY at a release worker; a sanitized
// one cannot run under an address-space limit.
std::vector<std::string> kcached_args(const testing::TempDir& dir) {
  const char* env = std::getenv("KCACHE_WORKER_BINARY");
  const bool release = env != nullptr && *env != '\0';
  return {"--config",        write_config(dir),
          "--worker-binary", release ? env : testing::built_binary("kcache-worker"),
          "--worker-memory", release ? "4GiB" : "0"};
}

std::unique_ptr<Client> connect(const KcachedProcess& kcached, const std::string& who) {
  client::ClientOptions o;
  o.url = kcached.url();
  o.token = who.empty() ? "" : strong_token(who);
  o.timeout = std::chrono::milliseconds(10000);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

// A kc1- key whose manifest puts it in namespace `ns`.
cachekey::KeyManifest manifest_in(const std::string& ns, const std::string& salt = "") {
  auto m = cachekey::KeyBuilder()
               .ns(ns)
               .graph_digest(std::string(64, 'c'))
               .hardware("cpu")
               .salt(salt)
               .build();
  EXPECT_TRUE(m.has_value());
  return *m;
}

client::PutOptions with_manifest(const cachekey::KeyManifest& m) {
  client::PutOptions o;
  o.producer = "test";
  o.manifest_json = cachekey::manifest_to_json(m);
  return o;
}

int status_of(const client::Result<void>& r) {
  return r ? 200 : r.error().http_status;
}

const std::vector<File> kFilesA = {{"f", "from team-a"}};
const std::vector<File> kFilesB = {{"f", "from team-b"}};

class Scopes : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<testing::TempDir>();
    kcached_ = std::make_unique<KcachedProcess>(kcached_args(*dir_));
  }
  static void TearDownTestSuite() {
    kcached_.reset();
    dir_.reset();
  }
  static std::unique_ptr<testing::TempDir> dir_;
  static std::unique_ptr<KcachedProcess> kcached_;
};
std::unique_ptr<testing::TempDir> Scopes::dir_;
std::unique_ptr<KcachedProcess> Scopes::kcached_;

TEST_F(Scopes, AWriterOfOneNamespaceCannotWriteDeleteOrLeaseAnother) {
  auto a = connect(*kcached_, "team-a");
  auto b = connect(*kcached_, "team-b");
  const cachekey::KeyManifest mb = manifest_in("team-b");
  const std::string kc1_b = mb.key();
  ASSERT_TRUE(b->put("torch:team-b:entry", kFilesB).has_value());
  ASSERT_TRUE(b->put(kc1_b, kFilesB, with_manifest(mb)).has_value());

  // Writes: named keys by their namespace, kc1- keys by their manifest's.
  EXPECT_EQ(status_of(a->put("torch:team-b:entry", kFilesA)), 403);
  EXPECT_EQ(status_of(a->put("torch:team-b:fresh", kFilesA)), 403);
  EXPECT_EQ(status_of(a->put(kc1_b, kFilesA, with_manifest(mb))), 403);
  EXPECT_EQ(status_of(a->put(kc1_b, kFilesA)), 403); // no manifest: namespace ""
  // A manifest of team-a does not hash to team-b's key: namespace "" too.
  client::PutOptions forged = with_manifest(manifest_in("team-a"));
  EXPECT_NE(status_of(a->put(kc1_b, kFilesA, forged)), 200);
  // Raw PUT /v1/ac of a record naming team-b's key.
  auto raw = a->request(client::HttpMethod::kPut, "/v1/ac/torch:team-b:entry",
                        R"({"key": "torch:team-b:entry", "outputs": []})", "application/json");
  ASSERT_TRUE(raw.has_value());
  EXPECT_EQ(raw->status, 403);

  // Deletes and leases: refused, and team-b's reads as a miss would (404).
  EXPECT_NE(status_of(a->remove("torch:team-b:entry")), 200);
  EXPECT_NE(status_of(a->remove(kc1_b)), 200);
  EXPECT_FALSE(a->acquire_lease("torch:team-b:fresh", std::chrono::seconds(5), "a").has_value());
  EXPECT_FALSE(a->acquire_lease(kc1_b, std::chrono::seconds(5), "a").has_value());
  auto lease = b->acquire_lease("torch:team-b:fresh", std::chrono::seconds(5), "b");
  ASSERT_TRUE(lease.has_value());
  EXPECT_TRUE(lease->granted) << "team-a's attempt took no lease";

  // team-b's entries are untouched, and invisible to team-a.
  for (const std::string& key : {std::string("torch:team-b:entry"), kc1_b}) {
    auto got = b->get(key);
    ASSERT_TRUE(got.has_value() && got->has_value()) << key;
    EXPECT_EQ((*got)->files.front().data, "from team-b") << key;
    auto hidden = a->get(key);
    ASSERT_TRUE(hidden.has_value()) << key;
    EXPECT_FALSE(hidden->has_value()) << key;
    auto entry = a->entry(key);
    ASSERT_FALSE(entry.has_value());
    EXPECT_EQ(entry.error().http_status, 404);
  }

  // team-a's own namespace works, kc1- keys of it included.
  const cachekey::KeyManifest ma = manifest_in("team-a");
  ASSERT_TRUE(a->put("torch:team-a:entry", kFilesA).has_value());
  ASSERT_TRUE(a->put(ma.key(), kFilesA, with_manifest(ma)).has_value());
  auto own = a->acquire_lease("torch:team-a:fresh", std::chrono::seconds(5), "a");
  ASSERT_TRUE(own.has_value());
  EXPECT_TRUE(own->granted);
  ASSERT_TRUE(a->put("torch:team-a:gone", kFilesA).has_value());
  EXPECT_EQ(status_of(a->remove("torch:team-a:gone")), 200);

  // A batch: keys of team-b come back as misses.
  const std::vector<std::string> keys = {"torch:team-b:entry", "torch:team-a:entry"};
  auto batch = a->batch_get(keys);
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->size(), 2U);
  EXPECT_FALSE((*batch)[0].has_value());
  EXPECT_TRUE((*batch)[1].has_value());

  // Listings show team-a's entries only.
  auto listed = a->list();
  ASSERT_TRUE(listed.has_value());
  bool saw_own = false;
  for (const auto& e : listed->entries) {
    EXPECT_EQ(e.key.find("team-b"), std::string::npos) << e.key;
    EXPECT_NE(e.key, kc1_b);
    saw_own |= e.key == "torch:team-a:entry";
  }
  EXPECT_TRUE(saw_own);

  // What spans every namespace needs admin on "*".
  auto cas_delete =
      a->request(client::HttpMethod::kDelete, "/v1/cas/" + std::string(64, '0'), {}, {});
  ASSERT_TRUE(cas_delete.has_value());
  EXPECT_EQ(cas_delete->status, 403);
  auto gc = a->request(client::HttpMethod::kPost, "/v1/admin/gc?max_size=0", {}, {});
  ASSERT_TRUE(gc.has_value());
  EXPECT_EQ(gc->status, 403);
}

TEST_F(Scopes, KccKeysAreWrittenByTheServiceOnly) {
  const std::string kcc = "kcc-" + std::string(64, 'e');
  auto writer = connect(*kcached_, "writer");
  EXPECT_EQ(status_of(writer->put(kcc, kFilesA)), 403);
  EXPECT_EQ(status_of(writer->remove(kcc)), 403);
  EXPECT_FALSE(writer->acquire_lease(kcc, std::chrono::seconds(5), "w").has_value());
  auto admin = connect(*kcached_, "admin"); // the plaintext token of the 0600 token_file
  EXPECT_EQ(status_of(admin->put(kcc, kFilesA)), 200);
  auto reader = connect(*kcached_, "reader");
  auto got = reader->get(kcc);
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->has_value()) << "kcc- keys are readable by any reader";
}

std::string cpp_spec(const std::string& tag) {
  return json{
      {"backend", "cpp"},
      {"source",
       {{"name", "kernel.cpp"}, {"text", "extern \"C\" int scoped() { return 14; } // " + tag}}},
      {"options", {"-O1", "-std=c++20"}},
      {"target", "x86-64-v2"},
      {"output", "object"}}
      .dump();
}

TEST_F(Scopes, AReadTokenCannotSubmit) {
  auto reader = connect(*kcached_, "reader");
  auto refused = reader->submit("torch:team-a:job", cpp_spec("read"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().http_status, 403);
  // Nor one that may submit, but in another namespace only.
  auto b = connect(*kcached_, "team-b");
  auto elsewhere = b->submit("torch:team-a:job", cpp_spec("b"));
  ASSERT_FALSE(elsewhere.has_value());
  EXPECT_EQ(elsewhere.error().http_status, 403);
}

TEST_F(Scopes, ASubmitTokenPublishesOnlyWhereItMayWrite) {
  auto ci = connect(*kcached_, "ci");
  const std::string victim = "torch:team-a:victim";
  auto submitted = ci->submit(victim, cpp_spec("ci"));
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE(submitted->job.has_value()) << submitted->status << ": " << submitted->message;
  const std::string compile_key = submitted->job->compile_key;
  EXPECT_EQ(submitted->published_under, std::vector<std::string>{compile_key});
  EXPECT_NE(submitted->client_key_refused.find("team-a"), std::string::npos)
      << submitted->client_key_refused;
  auto done = ci->job(submitted->job->id, std::chrono::seconds(120));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  ASSERT_EQ(done->state, client::JobState::kSucceeded) << done->error_message;
  auto reader = connect(*kcached_, "reader");
  auto under_victim = reader->get(victim);
  ASSERT_TRUE(under_victim.has_value());
  EXPECT_FALSE(under_victim->has_value()) << "the result must not land under team-a's key";
  auto under_compile_key = reader->get(compile_key);
  ASSERT_TRUE(under_compile_key.has_value());
  EXPECT_TRUE(under_compile_key->has_value());

  // A submitter that may write team-a gets its key.
  auto team_ci = connect(*kcached_, "team-a-ci");
  auto own = team_ci->submit("torch:team-a:own", cpp_spec("ci"));
  ASSERT_TRUE(own.has_value()) << own.error().message;
  EXPECT_TRUE(own->client_key_refused.empty()) << own->client_key_refused;
  auto hit = reader->get("torch:team-a:own");
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->has_value()) << own->status << ": " << own->message;
}

// A job is seen (and cancelled) by its submitter, and by tokens with the role
// in its key's namespace: for others it does not exist.
TEST_F(Scopes, JobsAreSeenWhereTheirKeysAre) {
  auto team_ci = connect(*kcached_, "team-a-ci");
  auto submitted = team_ci->submit("torch:team-a:seen", cpp_spec("seen"));
  ASSERT_TRUE(submitted.has_value()) << submitted.error().message;
  ASSERT_TRUE(submitted->job.has_value()) << submitted->status << ": " << submitted->message;
  const std::string id = submitted->job->id;
  auto done = team_ci->job(id, std::chrono::seconds(120));
  ASSERT_TRUE(done.has_value()) << done.error().message;
  auto b = connect(*kcached_, "team-b");
  auto hidden = b->job(id);
  ASSERT_FALSE(hidden.has_value());
  EXPECT_EQ(hidden.error().http_status, 404);
  auto cancel = b->cancel(id);
  ASSERT_FALSE(cancel.has_value());
  EXPECT_EQ(cancel.error().http_status, 404);
  auto listed = b->jobs();
  ASSERT_TRUE(listed.has_value());
  for (const auto& job : listed->jobs) {
    EXPECT_NE(job.id, id);
  }
  auto reader = connect(*kcached_, "reader"); // reads every namespace
  EXPECT_TRUE(reader->job(id).has_value());
  auto cancel_by_reader = reader->cancel(id); // the submit role is needed to cancel
  ASSERT_FALSE(cancel_by_reader.has_value());
  EXPECT_EQ(cancel_by_reader.error().http_status, 403);
}

// A job listing filters by namespace first, then applies `limit`: a scoped
// token gets its own jobs even when everyone else's are newer.
TEST_F(Scopes, AJobListingsLimitCountsTheJobsTheTokenMaySee) {
  auto team_a = connect(*kcached_, "team-a"); // reads team-a* only
  auto own = team_a->submit("torch:team-a:listed", cpp_spec("listed"));
  ASSERT_TRUE(own.has_value()) << own.error().message;
  ASSERT_TRUE(own->job.has_value()) << own->status << ": " << own->message;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto b = connect(*kcached_, "team-b");
  for (int i = 0; i < 3; ++i) {
    auto other = b->submit("torch:team-b:newer-" + std::to_string(i),
                           cpp_spec("newer-" + std::to_string(i)));
    ASSERT_TRUE(other.has_value()) << other.error().message;
  }
  client::JobsQuery one;
  one.limit = 1;
  auto listed = team_a->jobs(one);
  ASSERT_TRUE(listed.has_value()) << listed.error().message;
  ASSERT_EQ(listed->jobs.size(), 1U) << "team-b's newer jobs must not use up the limit";
  for (const auto& job : listed->jobs) {
    for (const std::string& key : job.keys) {
      EXPECT_EQ(key.find("team-b"), std::string::npos) << key;
    }
  }
  auto all = connect(*kcached_, "reader")->jobs(one); // reads everywhere: the newest one
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->jobs.size(), 1U);
}

// A lease taken without a holder name is held by the token's name.
TEST_F(Scopes, ALeaseHolderDefaultsToTheTokensName) {
  auto team_a = connect(*kcached_, "team-a");
  auto lease = team_a->acquire_lease("torch:team-a:held", std::chrono::seconds(30), "");
  ASSERT_TRUE(lease.has_value()) << lease.error().message;
  ASSERT_TRUE(lease->granted);
  auto seen = connect(*kcached_, "admin")
                  ->acquire_lease("torch:team-a:held", std::chrono::seconds(30), "other");
  ASSERT_TRUE(seen.has_value()) << seen.error().message;
  EXPECT_FALSE(seen->granted);
  EXPECT_EQ(seen->holder, "team-a");
  auto named = team_a->acquire_lease("torch:team-a:named", std::chrono::seconds(30), "rank-3");
  ASSERT_TRUE(named.has_value() && named->granted);
  EXPECT_EQ(named->holder, "rank-3"); // a name given is kept
}

// Start-up refuses the example's placeholders, weak tokens and plaintext
// that others may read, naming the token and the setting.
TEST(ScopesStartUp, WeakTokensStopStartUp) {
  testing::TempDir dir;
  auto refusal = [&](const std::string& name, const std::string& text, bool is_private) {
    const std::string path = (dir.path() / name).string();
    std::ofstream(path) << text;
    fs::permissions(path, is_private ? fs::perms::owner_read | fs::perms::owner_write
                                     : fs::perms::owner_read | fs::perms::owner_write |
                                           fs::perms::group_read | fs::perms::others_read);
    std::string out;
    const int rc = testing::run_command({"/bin/sh", "-c",
                                         testing::built_binary("kcached") + " --config " + path +
                                             " --listen 127.0.0.1:0" + " --data-dir " +
                                             (dir.path() / "data").string() + " --workers 0 2>&1"},
                                        out);
    EXPECT_NE(rc, 0) << name << " started";
    return out;
  };
  std::string out = refusal("placeholder.toml",
                            "[[tokens]]\nname = \"ops\"\nsha256 = \"<replace: kcache token new>\"\n"
                            "role = \"admin\"\n",
                            false);
  EXPECT_NE(out.find("'ops'"), std::string::npos) << out;
  EXPECT_NE(out.find("sha256"), std::string::npos) << out;
  EXPECT_NE(out.find("kcache token new"), std::string::npos) << out;
  out = refusal("old-placeholder.toml",
                "[[tokens]]\ntoken = \"replace-with-an-admin-token\"\nrole = \"admin\"\n", true);
  EXPECT_NE(out.find("placeholder"), std::string::npos) << out;
  out = refusal("short.toml", "[[tokens]]\nname = \"weak\"\ntoken = \"hunter2\"\nrole = \"read\"\n",
                true);
  EXPECT_NE(out.find("'weak'"), std::string::npos) << out;
  EXPECT_NE(out.find("too weak"), std::string::npos) << out;
  const std::string shared_path = (dir.path() / "shared.toml").string();
  out = refusal("shared.toml",
                "[[tokens]]\nname = \"open\"\ntoken = \"" + strong_token("open") +
                    "\"\nrole = \"read\"\n",
                false);
  EXPECT_NE(out.find("'open'"), std::string::npos) << out;
  EXPECT_NE(out.find("chmod 600 " + shared_path), std::string::npos) << out;
  // The shipped example, as it is.
  std::string example;
  testing::run_command({"/bin/sh", "-c",
                        testing::built_binary("kcached") + " --config " KCACHE_SOURCE_DIR
                                                           "/deploy/kcached.toml 2>&1"},
                       example);
  EXPECT_NE(example.find("placeholder"), std::string::npos) << example;
}

} // namespace
} // namespace kcache
