#include "fingerprint/fingerprint.h"

#include <string>
#include <vector>

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

TEST(FingerprintTest, DigestManyEqualsDigestOfEach) {
  std::string data(70000, '\0');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>((i * 131) ^ (i >> 7));
  }
  const std::vector<absl::string_view> messages = {
      absl::string_view(data).substr(0, 16384), absl::string_view(),
      absl::string_view(data).substr(3, 65536), "abc",
      absl::string_view(data).substr(100, 4097)};
  for (Kind kind : {Kind::kSha256, Kind::kXxh128, Kind::kNone}) {
    const std::vector<std::string> many = DigestMany(kind, messages);
    ASSERT_EQ(many.size(), messages.size());
    std::string packed(DigestSize(kind) * messages.size(), '\0');
    DigestManyTo(kind, messages, reinterpret_cast<unsigned char*>(packed.data()));
    for (size_t i = 0; i < messages.size(); ++i) {
      const std::string one = Digest(kind, messages[i]);
      EXPECT_EQ(many[i], one) << KindName(kind) << " message " << i;
      EXPECT_EQ(packed.substr(DigestSize(kind) * i, DigestSize(kind)), one)
          << KindName(kind) << " message " << i;
    }
    EXPECT_TRUE(DigestMany(kind, {}).empty());
  }
  EXPECT_EQ(ToHex(DigestMany(Kind::kSha256, messages)[3]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(FingerprintTest, HexIsLowerCase) {
  EXPECT_EQ(ToHex(std::string("\x00\xff\x1a", 3)), "00ff1a");
}

}  // namespace
}  // namespace chunkd::fingerprint
