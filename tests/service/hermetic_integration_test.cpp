// Hermetic compiles, end to end: a real kcached with real kcache-worker
// processes. Specs that would make a worker read or write host files are
// refused at submit with 400 and a reason; a canary file on the host never
// appears in any artifact, log or error, and no file outside the worker's
// scratch directory changes.

#include "kcached_process.h"

#include <kcache/client/client.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace kcache {
namespace {

using client::Client;
using nlohmann::json;
using testing::KcachedProcess;
namespace fs = std::filesystem;

constexpr std::string_view kSecret = "CANARY_7f3a91_SECRET";

std::unique_ptr<Client> connect(const std::string& url) {
  client::ClientOptions o;
  o.url = url;
  o.timeout = std::chrono::milliseconds(30000);
  auto c = Client::create(o);
  EXPECT_TRUE(c.has_value());
  return std::move(*c);
}

json spec(const std::string& backend, const std::string& source,
          std::vector<std::string> options = {}) {
  const bool cuda = backend == "cuda";
  return json{{"backend", backend},
              {"source", {{"name", cuda ? "k.cu" : "k.cpp"}, {"text", source}}},
              {"options", std::move(options)},
              {"target", cuda ? "sm_90a" : "x86-64-v2"},
              {"output", cuda ? "cubin" : "object"}};
}

// Every file under `dir` with its size and modification time, except
// kcached's own store and log: what no spec may change.
std::map<std::string, std::pair<std::uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::uintmax_t, fs::file_time_type>> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string relative = fs::relative(entry.path(), dir).string();
    if (entry.is_regular_file() && !relative.starts_with("data") && relative != "kcached.log") {
      files[relative] = {entry.file_size(), entry.last_write_time()};
    }
  }
  return files;
}

class Hermetic : public ::testing::Test {
protected:
  void SetUp() override {
    canary_dir_ = kcached_.dir().path() / "host";
    fs::create_directories(canary_dir_);
    canary_ = canary_dir_ / "canary.h";
    std::ofstream(canary_) << "#error " << kSecret << "\n";
    client_ = connect(kcached_.url());
  }

  // POST /v1/jobs; returns the status and the body.
  std::pair<int, std::string> submit(const json& s) {
    auto res = client_->request(client::HttpMethod::kPost, "/v1/jobs", json{{"spec", s}}.dump(),
                                "application/json");
    EXPECT_TRUE(res.has_value());
    return res ? std::pair{res->status, res->body} : std::pair{0, std::string()};
  }

  void expect_refused(const json& s, std::string_view why) {
    const auto [status, body] = submit(s);
    if (status == 503 && body.find("not built") != std::string::npos) {
      return; // a kcache built without the CUDA Toolkit has no cuda backend
    }
    EXPECT_EQ(status, 400) << s.dump() << "\n" << body;
    EXPECT_NE(body.find(why), std::string::npos) << body;
    EXPECT_EQ(body.find(kSecret), std::string::npos) << body;
  }

  KcachedProcess kcached_{
      {"--worker-binary", testing::built_binary("kcache-worker"), "--worker-memory", "0"}};
  fs::path canary_dir_;
  fs::path canary_;
  std::unique_ptr<Client> client_;
};

TEST_F(Hermetic, SpecsThatNameHostFilesAreRefusedAtSubmit) {
  const std::string abs = canary_.string();
  const std::string dir = canary_dir_.string();
  const auto before = snapshot(kcached_.dir().path());
  for (const std::string backend : {"cpp", "cuda"}) {
    SCOPED_TRACE(backend);
    expect_refused(spec(backend, "#include \"" + abs + "\"\n"), "absolute path");
    expect_refused(spec(backend, "#include <" + abs + ">\n"), "absolute path");
    expect_refused(spec(backend, "#include \"../host/canary.h\"\n"), "..");
    expect_refused(spec(backend, "#define F \"" + abs + "\"\n#include F\n"), "computed");
    expect_refused(spec(backend, "#if __has_include(\"" + abs + "\")\n#endif\n"), "absolute path");
    expect_refused(spec(backend, "int x;\n", {"-I", dir}), "host path");
    expect_refused(spec(backend, "int x;\n", {"-I" + dir}), "host path");
    expect_refused(spec(backend, "int x;\n", {"-include", abs}), "host path");
  }
  expect_refused(spec("cpp", "#embed \"" + abs + "\"\n"), "absolute path");
  expect_refused(spec("cpp", "asm(\".incbin \\\"" + abs + "\\\"\");\n"), ".incbin");
  expect_refused(spec("cpp", "int x;\n", {"-isystem", dir}), "host path");
  expect_refused(spec("cpp", "int x;\n", {"@" + abs}), "host path");
  // Dependency output: once wrote attacker-chosen lines anywhere kcached could.
  const std::string planted = (kcached_.dir().path() / "planted").string();
  expect_refused(spec("cpp", "int x;\n", {"-MD", "-MF", planted, "-MT", "evil"}),
                 "dependency file");
  expect_refused(spec("cpp", "int x;\n", {"-Xclang", "-dependency-file"}), "files");
  expect_refused(spec("cuda", "int x;\n", {"--time=" + planted}), "files");
  EXPECT_FALSE(fs::exists(planted));
  EXPECT_EQ(snapshot(kcached_.dir().path()), before) << "a file beside kcached changed";
}

TEST_F(Hermetic, RelativeIncludesDoNotReachTheWorkersDirectory) {
  // The worker runs in an empty scratch directory: "canary.h" beside kcached
  // (its working directory and data directory) is not found, and the secret
  // never reaches the log.
  std::ofstream(fs::current_path() / "canary.h") << "#error " << kSecret << "\n";
  std::ofstream(kcached_.dir().path() / "canary.h") << "#error " << kSecret << "\n";
  const auto [status, body] =
      submit(spec("cpp", "#include \"canary.h\"\nextern \"C\" int f() { return 1; }\n"));
  ASSERT_EQ(status, 202) << body;
  const std::string id = json::parse(body)["job"]["id"];
  json job;
  for (int i = 0; i < 200; ++i) {
    auto res = client_->request(client::HttpMethod::kGet, "/v1/jobs/" + id + "?wait_ms=1000");
    ASSERT_TRUE(res.has_value());
    job = json::parse(res->body);
    if (job["state"] == "failed" || job["state"] == "succeeded") {
      break;
    }
  }
  fs::remove(fs::current_path() / "canary.h");
  EXPECT_EQ(job["state"], "failed") << job.dump();
  EXPECT_EQ(job.dump().find(kSecret), std::string::npos) << job.dump();
  EXPECT_NE(job.dump().find("canary.h"), std::string::npos) << "the log names the missing file";
}

// Past the checks (string literals pasted into ".incbin"), the kernel still
// says no: the worker is confined to the toolchain's files by Landlock.
TEST_F(Hermetic, AConfinedWorkerCannotReadAHostFile) {
  if (kcached_.log().find("confined by landlock") == std::string::npos) {
    GTEST_SKIP() << "this kernel offers no Landlock";
  }
  const std::string source = "asm(\".inc\" \"bin \\\"" + canary_.string() +
                             "\\\"\");\nextern \"C\" int f() { return 1; }\n";
  const auto [status, body] = submit(spec("cpp", source));
  ASSERT_EQ(status, 202) << "the static check cannot see this one: " << body;
  const std::string id = json::parse(body)["job"]["id"];
  json job;
  for (int i = 0; i < 200; ++i) {
    auto res = client_->request(client::HttpMethod::kGet, "/v1/jobs/" + id + "?wait_ms=1000");
    ASSERT_TRUE(res.has_value());
    job = json::parse(res->body);
    if (job["state"] == "failed" || job["state"] == "succeeded") {
      break;
    }
  }
  EXPECT_EQ(job["state"], "failed") << job.dump();
  EXPECT_EQ(job.dump().find(kSecret), std::string::npos) << job.dump();
  EXPECT_NE(job.dump().find("Could not find incbin file"), std::string::npos) << job.dump();
}

TEST_F(Hermetic, UnknownTargetsAreRefusedWithTheValidValues) {
  json s = spec("cpp", "extern \"C\" int f() { return 1; }\n");
  s["target"] = "notacpu";
  expect_refused(s, "valid:");
  s["target"] = "x86-64-v3";
  s["output"] = "cubin";
  expect_refused(s, "valid: object, shared");
}

TEST_F(Hermetic, NativeIsKeyedAsThisHostsCpu) {
  json s = spec("cpp", "extern \"C\" int f() { return 1; }\n");
  s["target"] = "native";
  const auto [status, body] = submit(s);
  ASSERT_EQ(status, 202) << body;
  const json job = json::parse(body)["job"];
  EXPECT_NE(job["target"], "native") << "resolved before keying: " << job.dump();
  EXPECT_FALSE(job["target"].get<std::string>().empty());
  // Named explicitly with the same features, the CPU is the same compile.
  s["target"] = job["target"];
  const auto [status2, body2] = submit(s);
  EXPECT_TRUE(status2 == 202 || status2 == 200) << body2;
  EXPECT_NE(json::parse(body2)["job"]["compile_key"], job["compile_key"])
      << "without the host's -mattr list it is another compile";
}

} // namespace
} // namespace kcache
