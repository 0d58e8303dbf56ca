// Token rules (service/tokens.h, key_namespace.h): digests and the
// constant-time lookup, the Authorization header, strength and placeholder
// checks, token files and their permissions, roles per namespace pattern,
// and which namespace a key belongs to.

#include <kcache/service/key_namespace.h>
#include <kcache/service/tokens.h>

#include <gtest/gtest.h>
#include <strong_token.h>
#include <temp_dir.h>

#include <filesystem>
#include <fstream>

namespace kcache::service {
namespace {

namespace fs = std::filesystem;

std::string sha256_hex_of(std::string_view token) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const std::uint8_t b : token_digest(token)) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::string write_file(const kcache::testing::TempDir& dir, const std::string& name,
                       const std::string& text, fs::perms perms) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path) << text;
  fs::permissions(path, perms);
  return path;
}

constexpr fs::perms kPrivate = fs::perms::owner_read | fs::perms::owner_write;
constexpr fs::perms kShared = kPrivate | fs::perms::group_read | fs::perms::others_read;

TEST(Tokens, TheCompareFunctionAnswersEqualityOfDigests) {
  const TokenDigest a = token_digest("alpha");
  TokenDigest b = a;
  EXPECT_TRUE(digests_equal(a, b));
  b[31] ^= 1; // differs in the last byte only
  EXPECT_FALSE(digests_equal(a, b));
  b = a;
  b[0] ^= 0x80; // in the first only
  EXPECT_FALSE(digests_equal(a, b));
  EXPECT_FALSE(digests_equal(a, token_digest("alpha ")));
}

TEST(Tokens, FindTokenMatchesAnyPositionAndNothingElse) {
  const std::vector<Token> tokens = {
      make_token("first", kcache::testing::strong_token("1"), {{"*", Role::kRead}}),
      make_token("second", kcache::testing::strong_token("2"), {{"*", Role::kWrite}}),
      make_token("last", kcache::testing::strong_token("3"), {{"*", Role::kAdmin}})};
  for (const Token& t : tokens) {
    const std::string plain = kcache::testing::strong_token(t.name == "first"    ? "1"
                                                            : t.name == "second" ? "2"
                                                                                 : "3");
    const Token* found = find_token(tokens, plain);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, t.name);
  }
  EXPECT_EQ(find_token(tokens, kcache::testing::strong_token("4")), nullptr);
  EXPECT_EQ(find_token(tokens, ""), nullptr);
  // A prefix of a valid token is not it.
  EXPECT_EQ(find_token(tokens, kcache::testing::strong_token("1").substr(0, 63)), nullptr);
  EXPECT_EQ(find_token({}, "anything"), nullptr);
}

TEST(Tokens, BearerHeaderParsing) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer abc"), "abc");
  EXPECT_EQ(bearer_token("BEARER   abc  "), "abc");
  EXPECT_EQ(bearer_token("Bearer"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer "), std::nullopt);
  EXPECT_EQ(bearer_token("Bearerabc"), std::nullopt);
  EXPECT_EQ(bearer_token("Basic YWxhZGRpbjpvcGVu"), std::nullopt);
  EXPECT_EQ(bearer_token("Bearer a b"), std::nullopt);
  EXPECT_EQ(bearer_token(""), std::nullopt);
}

TEST(Tokens, EntropyEstimate) {
  EXPECT_GE(token_entropy_bits(kcache::testing::strong_token("x")), 256.0); // 64 hex
  EXPECT_GE(token_entropy_bits("0123456789abcdef0123456789abcdef"), 128.0); // 32 hex
  EXPECT_LT(token_entropy_bits("0123456789abcdef0123456789abcde"), 128.0);  // 31 hex
  // `kcache token new`'s shape: 43 base64url characters.
  EXPECT_GE(token_entropy_bits("q3Zx-9Lk_Vb2Wm8Tn4Pr7Ys1Hd6Jf0Gc5Ae-Ru2Io_K"), 240.0);
  EXPECT_LT(token_entropy_bits("reader-token"), 128.0);
  EXPECT_LT(token_entropy_bits("hunter2"), 128.0);
  EXPECT_LT(token_entropy_bits(std::string(200, 'a')), 128.0);          // one character
  EXPECT_LT(token_entropy_bits("abababababababababababababab"), 128.0); // two
  EXPECT_EQ(token_entropy_bits(""), 0.0);
}

TEST(Tokens, PlaceholdersAreKnown) {
  EXPECT_TRUE(is_placeholder_token("replace-with-an-admin-token"));
  EXPECT_TRUE(is_placeholder_token("replace-with-a-reader-token"));
  EXPECT_TRUE(is_placeholder_token("<replace: kcache token new>"));
  EXPECT_FALSE(is_placeholder_token(kcache::testing::strong_token("x")));
}

TEST(Tokens, ConfigForms) {
  const std::string strong = kcache::testing::strong_token("cfg");
  auto tokens =
      parse_token_file_text("[[tokens]]\nname = \"ci\"\nsha256 = \"" + sha256_hex_of(strong) +
                                "\"\nroles = { \"team-a*\" = \"write\", \"*\" = \"read\" }\n"
                                "[[tokens]]\ntoken = \"" +
                                kcache::testing::strong_token("old") + "\"\nrole = \"admin\"\n",
                            "t.toml", /*source_private=*/true);
  ASSERT_TRUE(tokens.has_value()) << tokens.error();
  ASSERT_EQ(tokens->size(), 2U);
  EXPECT_EQ((*tokens)[0].name, "ci");
  EXPECT_EQ((*tokens)[1].name, "token-1"); // the old form: no name
  EXPECT_TRUE(digests_equal((*tokens)[0].sha256, token_digest(strong)));
  const Principal ci = Principal::of((*tokens)[0]);
  EXPECT_EQ(ci.role_in("team-a"), Role::kWrite);
  EXPECT_EQ(ci.role_in("team-a/vision"), Role::kWrite);
  EXPECT_EQ(ci.role_in("team-b"), Role::kRead);
  EXPECT_EQ(ci.role_in(""), Role::kRead);
  EXPECT_TRUE(ci.may_somewhere(Role::kWrite));
  EXPECT_FALSE(ci.may_everywhere(Role::kWrite));
  EXPECT_TRUE(ci.may_everywhere(Role::kRead));
  const Principal admin = Principal::of((*tokens)[1]);
  EXPECT_TRUE(admin.may_everywhere(Role::kAdmin));
  const Principal none{"n", {{"team-a", Role::kWrite}}};
  EXPECT_EQ(none.role_in("team-b"), std::nullopt);
  EXPECT_FALSE(none.may(Role::kRead, "team-ab"));
}

TEST(Tokens, RefusalsNameTheTokenAndTheSetting) {
  auto error_of = [](const std::string& text, bool is_private = true) {
    auto r = parse_token_file_text(text, "cfg.toml", is_private);
    return r ? std::string() : r.error();
  };
  // The shipped placeholders, old and new, and their digests.
  std::string e = error_of("[[tokens]]\nname = \"ops\"\nsha256 = \"<replace: kcache token new>\"\n"
                           "role = \"admin\"\n");
  EXPECT_NE(e.find("'ops'"), std::string::npos) << e;
  EXPECT_NE(e.find("sha256 is still the example's placeholder"), std::string::npos) << e;
  e = error_of("[[tokens]]\ntoken = \"replace-with-an-admin-token\"\nrole = \"admin\"\n");
  EXPECT_NE(e.find("placeholder"), std::string::npos) << e;
  e = error_of("[[tokens]]\nsha256 = \"" + sha256_hex_of("replace-with-a-ci-token") +
               "\"\nrole = \"submit\"\n");
  EXPECT_NE(e.find("placeholder"), std::string::npos) << e;
  // Short.
  e = error_of("[[tokens]]\nname = \"weak\"\ntoken = \"reader-token\"\nrole = \"read\"\n");
  EXPECT_NE(e.find("'weak'"), std::string::npos) << e;
  EXPECT_NE(e.find("too weak"), std::string::npos) << e;
  // Plaintext where others may read it.
  e = error_of("[[tokens]]\ntoken = \"" + kcache::testing::strong_token("p") +
                   "\"\nrole = \"read\"\n",
               /*is_private=*/false);
  EXPECT_NE(e.find("chmod 600 cfg.toml"), std::string::npos) << e;
  // Malformed entries.
  EXPECT_NE(error_of("[[tokens]]\nsha256 = \"abc\"\nrole = \"read\"\n").find("64 hex"),
            std::string::npos);
  EXPECT_NE(error_of("[[tokens]]\nrole = \"read\"\n").find("give one of sha256"),
            std::string::npos);
  EXPECT_NE(error_of("[[tokens]]\nsha256 = \"" + std::string(64, 'b') + "\"\n").find("role"),
            std::string::npos);
  EXPECT_NE(error_of("[[tokens]]\nsha256 = \"" + std::string(64, 'b') +
                     "\"\nroles = { \"*\" = \"root\" }\n")
                .find("unknown role"),
            std::string::npos);
  // Names and digests are unique.
  const std::vector<Token> twice = {make_token("x", "a", {}), make_token("x", "b", {})};
  EXPECT_FALSE(check_unique_tokens(twice).has_value());
  const std::vector<Token> same = {make_token("x", "a", {}), make_token("y", "a", {})};
  EXPECT_FALSE(check_unique_tokens(same).has_value());
}

TEST(Tokens, TokenFilesMustBePrivate) {
  kcache::testing::TempDir dir;
  const std::string text =
      "[[tokens]]\ntoken = \"" + kcache::testing::strong_token("f") + "\"\nrole = \"read\"\n";
  const std::string shared = write_file(dir, "shared.toml", text, kShared);
  auto refused = load_token_file(shared);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("token_file"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("chmod 600"), std::string::npos) << refused.error();
  auto loaded = load_token_file(write_file(dir, "private.toml", text, kPrivate));
  ASSERT_TRUE(loaded.has_value()) << loaded.error();
  EXPECT_EQ(loaded->size(), 1U);
  EXPECT_FALSE(load_token_file((dir.path() / "absent.toml").string()).has_value());
}

// A config with token_file, and one whose plaintext tokens sit in a file
// others may read (load_config_file: start-up refuses it).
TEST(Tokens, ConfigFilesApplyTheRules) {
  kcache::testing::TempDir dir;
  const std::string token_file =
      write_file(dir, "tokens.toml",
                 "[[tokens]]\nname = \"more\"\ntoken = \"" + kcache::testing::strong_token("m") +
                     "\"\nrole = \"write\"\n",
                 kPrivate);
  const std::string config =
      write_file(dir, "kcached.toml",
                 "token_file = \"" + token_file + "\"\n[[tokens]]\nname = \"main\"\nsha256 = \"" +
                     sha256_hex_of(kcache::testing::strong_token("main")) + "\"\nrole = \"read\"\n",
                 kShared);
  auto c = load_config_file(config);
  ASSERT_TRUE(c.has_value()) << c.error();
  ASSERT_EQ(c->tokens.size(), 2U);
  EXPECT_EQ(c->tokens[0].name, "main");
  EXPECT_EQ(c->tokens[1].name, "more");
  // Old form, plaintext in a 0644 config: refused naming the file.
  const std::string old = write_file(dir, "old.toml",
                                     "[[tokens]]\ntoken = \"" + kcache::testing::strong_token("o") +
                                         "\"\nrole = \"read\"\n",
                                     kShared);
  auto refused = load_config_file(old);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("chmod 600 " + old), std::string::npos) << refused.error();
  // ... and accepted once it is private.
  fs::permissions(old, kPrivate);
  EXPECT_TRUE(load_config_file(old).has_value());
}

TEST(KeyNamespace, KeysAndTheirNamespaces) {
  EXPECT_EQ(key_scope("kcc-" + std::string(64, 'a')).kind, KeyScope::Kind::kCompile);
  EXPECT_EQ(key_scope("kc1-" + std::string(64, 'a')).kind, KeyScope::Kind::kManifest);
  EXPECT_EQ(key_scope("torch:team-a:fxgraph-abc").ns, "team-a");
  EXPECT_EQ(key_scope("triton:team-b:k:kernel.cubin").ns, "team-b");
  EXPECT_EQ(key_scope("torch::x").ns, "");
  EXPECT_EQ(key_scope("torch:team-a").ns, "");   // no third field: not a named key
  EXPECT_EQ(key_scope("Torch:team-a:x").ns, ""); // kinds are lowercase
  EXPECT_EQ(key_scope("plain-key").ns, "");
  EXPECT_EQ(key_scope("plain-key").kind, KeyScope::Kind::kNamed);
}

TEST(KeyNamespace, GlobPatterns) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything/at:all"));
  EXPECT_TRUE(glob_match("team-a*", "team-a"));
  EXPECT_TRUE(glob_match("team-a*", "team-a/vision"));
  EXPECT_FALSE(glob_match("team-a*", "team-b"));
  EXPECT_TRUE(glob_match("team-a/*", "team-a/x/y"));
  EXPECT_FALSE(glob_match("team-a/*", "team-a"));
  EXPECT_TRUE(glob_match("team-a", "team-a"));
  EXPECT_FALSE(glob_match("team-a", "team-ab"));
  EXPECT_TRUE(glob_match("*-prod", "vision-prod"));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXbYY"));
  EXPECT_FALSE(glob_match("", "x"));
  // No exponential blow-up on many stars.
  EXPECT_FALSE(glob_match(std::string(50, '*') + "b", std::string(10000, 'a')));
}

} // namespace
} // namespace kcache::service
