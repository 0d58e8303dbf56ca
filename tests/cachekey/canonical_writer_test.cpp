#include <kcache/cachekey/canonical_writer.h>

#include <gtest/gtest.h>

#include <cmath>

namespace kcache::cachekey {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(to_hex(Sha256::of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(Sha256::of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 incremental;
  incremental.update("a").update("bc");
  EXPECT_EQ(incremental.finish(), Sha256::of("abc"));
}

TEST(Sha256, HexRoundTripAndRejects) {
  const Digest d = Sha256::of("x");
  EXPECT_EQ(digest_from_hex(to_hex(d)), d);
  EXPECT_FALSE(digest_from_hex("abc").has_value());
  EXPECT_FALSE(digest_from_hex(std::string(64, 'g')).has_value());
}

TEST(CanonicalWriter, LengthPrefixingSeparatesConcatenations) {
  // "ab"+"c" and "a"+"bc" must not collide.
  EXPECT_NE(CanonicalWriter().str("ab").str("c").sha256(),
            CanonicalWriter().str("a").str("bc").sha256());
  // A string and a tag with the same text differ.
  EXPECT_NE(CanonicalWriter().str("x").bytes(), CanonicalWriter().tag("x").bytes());
  // An int and a float with the same value differ.
  EXPECT_NE(CanonicalWriter().i64(1).bytes(), CanonicalWriter().f64(1.0).bytes());
}

TEST(CanonicalWriter, NaNsAreCanonical) {
  EXPECT_EQ(CanonicalWriter().f64(std::nan("1")).bytes(),
            CanonicalWriter().f64(-std::nan("2")).bytes());
  EXPECT_NE(CanonicalWriter().f64(0.0).bytes(), CanonicalWriter().f64(-0.0).bytes());
}

} // namespace
} // namespace kcache::cachekey
