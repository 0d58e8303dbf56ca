// Golden vectors pin the key encoding. If one of these fails, the encoding of a
// key component changed: every existing key would silently stop hitting (or
// worse, start colliding). Bump kKeySchemaVersion and update the vectors in the
// same change.
//
// Schema 2 changed every vector below: the version is hashed into each key
// (MinimalManifest); node digests now cover each node's place among effects
// (BlockGraphAndFullManifest's graph digest); guards are parsed and rendered
// canonically. The empty component digests did not change.

#include "test_graphs.h"

#include <kcache/cachekey/graph_digest.h>
#include <kcache/cachekey/guards.h>
#include <kcache/cachekey/key_manifest.h>
#include <kcache/cachekey/options.h>

#include <gtest/gtest.h>

namespace kcache::cachekey {
namespace {

TEST(GoldenKeys, SchemaVersionIsTwo) {
  EXPECT_EQ(kKeySchemaVersion, 2U);
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
  EXPECT_EQ(m.key(), "kc1-282722b3eb0d5501b682a7875cfd66fd3c89e0ade98819b83a84a8acefa23902");
}

TEST(GoldenKeys, BlockGraphAndFullManifest) {
  const Graph g = testing::make_block();
  EXPECT_EQ(to_hex(digest_graph(g).root),
            "672fbe9bd27502942cfbb7d8d8e08739d8e64d117f0d7f2ceafebe8fcd2bc101");
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
  EXPECT_EQ(m->key(), "kc1-7693c11d6c2083a2d7dc7004f8bce25da18dc0b3cb96ac78c64203717f47ff34");
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
