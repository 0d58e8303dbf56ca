// pack_headers on a temporary directory tree: what is packed, under which
// name, in which search order, and what is refused.

#include "temp_dir.h"

#include <kcache/client/pack_headers.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace kcache::client {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class PackHeaders : public ::testing::Test {
protected:
  // Writes `text` at `relative` under the temp dir; returns the full path.
  std::string write(const std::string& relative, const std::string& text) {
    const fs::path path = dir_.path() / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string at(const std::string& relative) const { return (dir_.path() / relative).string(); }

  static json spec(const std::string& source, std::vector<std::string> options,
                   const std::string& backend = "cpp") {
    return json{{"backend", backend},
                {"source", {{"name", "k.cpp"}, {"text", source}}},
                {"options", std::move(options)},
                {"target", "x86-64-v2"},
                {"output", "object"}};
  }

  static json pack(const json& s, const PackOptions& options = {}) {
    auto packed = pack_headers(s.dump(), options);
    EXPECT_TRUE(packed.has_value()) << (packed ? "" : packed.error().message);
    return packed ? json::parse(*packed) : json();
  }

  static std::string pack_error(const json& s, const PackOptions& options = {}) {
    auto packed = pack_headers(s.dump(), options);
    EXPECT_FALSE(packed.has_value()) << *packed;
    if (packed) {
      return {};
    }
    EXPECT_EQ(packed.error().code, ErrorCode::kInvalid);
    return packed.error().message;
  }

  static std::map<std::string, std::string> headers(const json& s) {
    std::map<std::string, std::string> out;
    for (const json& h : s.at("headers")) {
      out[h.at("name")] = h.at("text");
    }
    return out;
  }

  testing::TempDir dir_;
};

TEST_F(PackHeaders, NestedIncludesArePackedUnderTheNamesTheyAreIncludedBy) {
  write("inc/sub/a.h", "#pragma once\n#include \"b.h\"\n#include <c/d.h>\nint a();\n");
  write("inc/sub/b.h", "int b();\n");
  write("inc/c/d.h", "#include \"e.h\" // relative to c/\nint d();\n");
  write("inc/c/e.h", "#include \"sub/a.h\" // a cycle back\n");
  json s =
      spec("#include \"sub/a.h\"\nint f() { return a(); }\n", {"-O2", "-I", at("inc"), "-DX=1"});
  s["extra"] = {{"kept", true}};
  const json packed = pack(s);
  EXPECT_EQ(packed["options"], json({"-O2", "-DX=1"}));
  EXPECT_EQ(packed["extra"], s["extra"]) << "unknown fields are kept";
  EXPECT_EQ(packed["source"], s["source"]);
  EXPECT_EQ(packed["target"], "x86-64-v2");
  const auto h = headers(packed);
  EXPECT_EQ(h.size(), 4U) << packed.dump();
  EXPECT_EQ(h.at("sub/a.h"), "#pragma once\n#include \"b.h\"\n#include <c/d.h>\nint a();\n");
  EXPECT_EQ(h.at("b.h"), "int b();\n");
  EXPECT_EQ(h.at("c/d.h"), "#include \"e.h\" // relative to c/\nint d();\n");
  EXPECT_EQ(h.at("e.h"), "#include \"sub/a.h\" // a cycle back\n");
}

TEST_F(PackHeaders, SearchOrderIsTheCompilers) {
  // A quoted include looks beside its includer first, then in -iquote, then
  // in -I dirs in order, then -isystem, -idirafter, PackOptions dirs.
  write("one/sub/a.h", "#include \"x.h\"\n#include <y.h>\n");
  write("one/sub/x.h", "near");
  write("one/x.h", "far");
  write("quote/q.h", "quote");
  write("one/y.h", "one");
  write("two/y.h", "two");
  write("two/z.h", "two");
  write("sys/z.h", "sys");
  write("sys/w.h", "sys");
  write("extra/w.h", "extra");
  write("extra/v.h", "extra");
  write("after/v.h", "after");
  write("after/u.h", "after");
  write("extra/u.h", "extra");
  const json s = spec("#include \"sub/a.h\"\n#include \"q.h\"\n#include <z.h>\n#include <w.h>\n"
                      "#include <v.h>\n#include <u.h>\n",
                      {"-idirafter", at("after"), "-isystem", at("sys"), "-iquote", at("quote"),
                       "-I" + at("one"), "--include-directory=" + at("two")});
  const json packed = pack(s, {.include_dirs = {at("extra")}});
  EXPECT_EQ(packed["options"], json::array());
  const auto h = headers(packed);
  EXPECT_EQ(h.at("x.h"), "near");
  EXPECT_EQ(h.at("q.h"), "quote");
  EXPECT_EQ(h.at("y.h"), "one");
  EXPECT_EQ(h.at("z.h"), "two");
  EXPECT_EQ(h.at("w.h"), "sys");
  EXPECT_EQ(h.at("v.h"), "after");
  EXPECT_EQ(h.at("u.h"), "after");

  // -iquote is for quoted includes only.
  const json angled = pack(spec("#include <q.h>\n", {"-iquote", at("quote")}));
  EXPECT_EQ(angled["headers"], json::array());
}

TEST_F(PackHeaders, TwoFilesUnderOneNameAreRefused) {
  write("one/sub/a.h", "#include \"x.h\"\n");
  write("one/sub/x.h", "near");
  write("one/x.h", "far");
  const std::string error =
      pack_error(spec("#include \"sub/a.h\"\n#include \"x.h\"\n", {"-I", at("one")}));
  EXPECT_NE(error.find("'x.h'"), std::string::npos) << error;
  EXPECT_NE(error.find(at("one/x.h")), std::string::npos) << error;
  EXPECT_NE(error.find(at("one/sub/x.h")), std::string::npos) << error;

  // A name found for one include and left to the toolchain for another.
  write("two/sub/a.h", "#include \"t.h\"\n");
  write("two/sub/t.h", "packed");
  const std::string toolchain =
      pack_error(spec("#include \"t.h\"\n#include \"sub/a.h\"\n", {"-I", at("two")}));
  EXPECT_NE(toolchain.find("toolchain"), std::string::npos) << toolchain;

  // The same text under two paths is one header.
  write("three/sub/a.h", "#include \"s.h\"\n");
  write("three/sub/s.h", "same");
  write("three/s.h", "same");
  const json same = pack(spec("#include \"s.h\"\n#include \"sub/a.h\"\n", {"-I", at("three")}));
  EXPECT_EQ(headers(same).at("s.h"), "same");
}

TEST_F(PackHeaders, DotDotAndAbsoluteIncludesAreRefusedWithWhereTheyAre) {
  write("inc/sub/a.h", "int a;\n\n#include \"../secret.h\"\n");
  write("inc/secret.h", "secret");
  const std::string error = pack_error(spec("#include \"sub/a.h\"\n", {"-I", at("inc")}));
  EXPECT_NE(error.find("sub/a.h:3"), std::string::npos) << error;
  EXPECT_NE(error.find("../secret.h"), std::string::npos) << error;

  const std::string absolute = pack_error(spec("#include \"" + at("inc/secret.h") + "\"\n", {}));
  EXPECT_NE(absolute.find("k.cpp:1"), std::string::npos) << absolute;
  EXPECT_NE(absolute.find("absolute"), std::string::npos) << absolute;
}

TEST_F(PackHeaders, ToolchainHeadersAreLeftAlone) {
  write("inc/own.h", "#include <vector>\n#include <cuda_bf16.h>\n");
  const json s = spec("#include <cstdio>\n#include \"own.h\"\n#include \"nowhere.h\"\n",
                      {"--include-path=" + at("inc"), "-I", at("inc"), "--use_fast_math"}, "cuda");
  const json packed = pack(s);
  EXPECT_EQ(packed["options"], json({"--use_fast_math"}));
  ASSERT_EQ(packed["headers"].size(), 1U) << packed.dump();
  EXPECT_EQ(packed["headers"][0]["name"], "own.h");

  // No includes anywhere: the spec comes back as it was.
  const json plain = spec("int f() { return 1; }\n", {"-O2"});
  EXPECT_EQ(pack(plain)["options"], plain["options"]);
  EXPECT_EQ(pack(plain)["headers"], json::array());
}

TEST_F(PackHeaders, HeadersTheSpecCarriesAreKeptAndFollowed) {
  write("inc/a.h", "from disk");
  write("inc/b.h", "b from disk");
  json s = spec("#include \"a.h\"\n", {"-I", at("inc")});
  s["headers"] = json::array({{{"name", "a.h"}, {"text", "#include \"b.h\"\n"}}});
  const auto h = headers(pack(s));
  EXPECT_EQ(h.at("a.h"), "#include \"b.h\"\n");
  EXPECT_EQ(h.at("b.h"), "b from disk");
}

TEST_F(PackHeaders, LimitsAreEnforced) {
  write("inc/a.h", "#include \"b.h\"\n");
  write("inc/b.h", std::string(100, 'x'));
  const json s = spec("#include \"a.h\"\n", {"-I", at("inc")});
  EXPECT_EQ(headers(pack(s, {.include_dirs = {}, .max_total_bytes = 200, .max_files = 2})).size(),
            2U);
  const std::string files = pack_error(s, {.include_dirs = {}, .max_files = 1});
  EXPECT_NE(files.find("more than 1 headers"), std::string::npos) << files;
  const std::string bytes = pack_error(s, {.include_dirs = {}, .max_total_bytes = 100});
  EXPECT_NE(bytes.find("exceed 100 bytes"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find("b.h"), std::string::npos) << bytes;
}

TEST_F(PackHeaders, BadInputIsRefused) {
  EXPECT_NE(pack_error(json::array()).find("not a JSON object"), std::string::npos);
  EXPECT_NE(pack_error(json{{"backend", "cpp"}}).find("source"), std::string::npos);
  EXPECT_NE(pack_error(spec("int x;\n", {"--no-such-flag"})).find("options"), std::string::npos);
  EXPECT_NE(pack_error(spec("#define H \"a.h\"\n#include H\n", {})).find("computed"),
            std::string::npos);
  write("inc/bin.h", std::string("\xff\xfe", 2));
  EXPECT_NE(pack_error(spec("#include <bin.h>\n", {"-I", at("inc")})).find("UTF-8"),
            std::string::npos);
  if (geteuid() != 0) { // root reads any file
    write("inc/closed.h", "x");
    fs::permissions(at("inc/closed.h"), fs::perms::none);
    EXPECT_NE(pack_error(spec("#include <closed.h>\n", {"-I", at("inc")})).find("cannot read"),
              std::string::npos);
  }
}

TEST_F(PackHeaders, IrAndPtxSpecsComeBackAsTheyWere) {
  const std::string ir = R"({"backend":"llvm-ir","source":{"name":"k.ll","text":"#include <x>"}})";
  auto packed = pack_headers(ir, {});
  ASSERT_TRUE(packed.has_value());
  EXPECT_EQ(*packed, ir);
}

} // namespace
} // namespace kcache::client
