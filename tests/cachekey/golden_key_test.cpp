// Golden vectors pin the key encoding. If one of these fails, the encoding of a
// key component changed: every existing key would silently stop hitting (or
// worse, start colliding). Bump kKeySchemaVersion and update the vectors in the
// same change.

#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/guards.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/options.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

TEST(GoldenKeys, SchemaVersionIsOne) {
  EXPECT_EQ(kKeySchemaVersion, 1U);
}

TEST(GoldenKeys, EmptyComponentDigests) {
  EXPECT_EQ(to_hex(guards_digest({})),
            "c802fbee6dbf71a34773f0646f812c93d50ce3d108603e729b2d982c9074efb8");
  EXPECT_EQ(to_hex(options_digest({})),
            "faafb4ad46c623bb177b016eb7ce3a6c2a86d5822103796415bfef9b5d0131ea");
  EXPECT_EQ(to_hex(ToolchainFingerprint().digest()),
            "ab735a6a5b236bca95f328e8e8c2b8df1c78a3eb90112c3a615ecd68213e8d25");
}

TEST(GoldenKeys, MinimalManifest) {
  KeyManifest m;
  m.ns = "golden";
  m.graph_digest = std::string(64, '0');
  m.hardware_class = "x86_64:avx2";
  EXPECT_EQ(m.key(), "kc1-e595c5df6d1ad60665fc2e4d49f631deaaa3e50cbf980ca0209f6dd203c179e1");
}

TEST(GoldenKeys, BlockGraphAndFullManifest) {
  const Graph g = testing::make_block();
  EXPECT_EQ(to_hex(digest_graph(g).root),
            "376e13a216cbf55faaad146fc9f01f9abdfd3391d4b0f77ae27ccad1b85c4c59");
  const auto m = KeyBuilder()
                     .ns("golden")
                     .graph(g)
                     .guards({"s0 % 16 == 0", "2 <= s0 <= 4096"})
                     .hardware("cuda:sm_90a")
                     .toolchain(ToolchainFingerprint().add("nvrtc", "13.0.88"))
                     .options({"-O3", "-DBLOCK=128"})
                     .salt("s")
                     .build();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->key(), "kc1-9ce49ec6ee31eb864aac9458c67d1bc9ca751a22acae506fadc6dfde7452d731");
}

TEST(KeyManifest, JsonRoundTripKeepsKey) {
  const auto m = KeyBuilder()
                     .ns("rt")
                     .graph(testing::make_block())
                     .guards({"s0 >= 2"})
                     .hardware("cuda:sm_90a")
                     .toolchain(ToolchainFingerprint().add("nvrtc", "13"))
                     .options({"-O3"})
                     .build();
  ASSERT_TRUE(m.has_value());
  const auto back = manifest_from_json(manifest_to_json(*m));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(*back, *m);
  EXPECT_EQ(back->key(), m->key());
}

TEST(KeyManifest, RejectsTamperedOrMalformedJson) {
  const auto m = KeyBuilder().ns("rt").graph_digest(std::string(64, 'b')).hardware("h").build();
  ASSERT_TRUE(m.has_value());
  std::string text = manifest_to_json(*m);
  text.replace(text.find("\"rt\""), 4, "\"xx\"");
  EXPECT_FALSE(manifest_from_json(text).has_value()); // no longer hashes to its key
  EXPECT_FALSE(manifest_from_json("{").has_value());
  EXPECT_FALSE(manifest_from_json("[]").has_value());
  EXPECT_FALSE(manifest_from_json(R"({"schema_version":"x"})").has_value());
}

TEST(KeyManifest, BuildNeedsAGraphAndValidGuards) {
  EXPECT_FALSE(KeyBuilder().ns("x").build().has_value());
  EXPECT_FALSE(
      KeyBuilder().graph_digest(std::string(64, 'c')).guards({"s0 $ 3"}).build().has_value());
}

TEST(KeyFormat, Validation) {
  EXPECT_TRUE(is_valid_key("kc1-" + std::string(64, 'a')));
  EXPECT_FALSE(is_valid_key("kc1-" + std::string(63, 'a')));
  EXPECT_FALSE(is_valid_key("kc2-" + std::string(64, 'a')));
  EXPECT_FALSE(is_valid_key("kc1-" + std::string(64, 'A')));
  EXPECT_FALSE(is_valid_key("kc1-../../etc/passwd"));
}

} // namespace
} // namespace kcache::cachekey
