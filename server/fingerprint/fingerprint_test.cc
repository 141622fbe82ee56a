#include "fingerprint/fingerprint.h"

#include "gtest/gtest.h"

namespace chunkd::fingerprint {
namespace {

TEST(FingerprintTest, Sha256MatchesKnownVectors) {
  EXPECT_EQ(ToHex(Digest(Kind::kSha256, "")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ToHex(Digest(Kind::kSha256, "abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(FingerprintTest, Xxh128MatchesKnownVectors) {
  // XXH3_128bits of the empty input with seed 0 (xxHash's sanity table).
  EXPECT_EQ(ToHex(Digest(Kind::kXxh128, "")),
            "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Digest(Kind::kXxh128, "abc").size(), 16u);
  EXPECT_NE(Digest(Kind::kXxh128, "abc"), Digest(Kind::kXxh128, "abd"));
}

TEST(FingerprintTest, NoneIsEmpty) {
  EXPECT_EQ(Digest(Kind::kNone, "abc"), "");
  EXPECT_EQ(DigestSize(Kind::kNone), 0u);
}

TEST(FingerprintTest, ParsesNamesAndRejectsOthers) {
  for (Kind kind : {Kind::kNone, Kind::kSha256, Kind::kXxh128}) {
    auto parsed = ParseKind(KindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  auto bad = ParseKind("md5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("md5"), std::string::npos);
}

TEST(FingerprintTest, HexIsLowerCase) {
  EXPECT_EQ(ToHex(std::string("\x00\xff\x1a", 3)), "00ff1a");
}

}  // namespace
}  // namespace chunkd::fingerprint
