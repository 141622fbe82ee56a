// The bucket layout's keys, fields and values, without a Redis.
#include "index/redis_layout.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

TEST(BucketLayoutTest, KeyFieldAndFingerprintRoundTrip) {
  const std::string fp = "\xab\xcd\xef" + std::string(29, 'x');
  const BucketLayout whole(16);
  EXPECT_EQ(whole.BucketKey("ns", fp), "chunkd-b16:ns:\xab\xcd");
  EXPECT_EQ(whole.Field(fp), fp.substr(2));
  EXPECT_EQ(whole.Fingerprint("\xab\xcd", whole.Field(fp)), fp);
  // 18 bits: the third byte's top two bits, the rest zeroed; the field
  // keeps that byte whole.
  const BucketLayout part(18);
  EXPECT_EQ(part.BucketKey("ns", fp), "chunkd-b18:ns:\xab\xcd\xc0");
  EXPECT_EQ(part.Field(fp), fp.substr(2));
  EXPECT_EQ(part.Fingerprint("\xab\xcd\xc0", part.Field(fp)), fp);
  // Too short for a field past the bucket: the bucket without bytes.
  EXPECT_EQ(part.BucketKey("ns", "ab"), "chunkd-b18:ns:");
  EXPECT_EQ(part.Field("ab"), "ab");
  EXPECT_EQ(part.Fingerprint("", "ab"), "ab");
  EXPECT_FALSE(part.ValidFingerprint("").ok());
  EXPECT_TRUE(part.ValidFingerprint("a").ok());
}

TEST(EntryValueTest, EncodesAndDecodes) {
  EntryValue v;
  v.refs = 300;  // two varint bytes
  v.size = 16384;
  v.hints.push_back({HintTag("p"), {16384, 20480}, {1, 2, 3}});
  v.hints.push_back({HintTag("q"), {7}, {}});
  const std::string bytes = EncodeEntryValue(v);
  EXPECT_EQ(bytes.substr(0, 5), std::string("\xac\x02\x80\x80\x01", 5));
  EntryValue back;
  ASSERT_TRUE(DecodeEntryValue(bytes, &back));
  EXPECT_EQ(back.refs, 300u);
  EXPECT_EQ(back.size, 16384u);
  ASSERT_EQ(back.hints.size(), 2u);
  EXPECT_EQ(back.hints[0].tag, HintTag("p"));
  EXPECT_EQ(back.hints[0].sizes, (std::vector<uint32_t>{16384, 20480}));
  EXPECT_EQ(back.hints[0].run, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(back.hints[1].sizes, std::vector<uint32_t>{7});
  // Truncated or trailing garbage: not a value.
  EXPECT_FALSE(DecodeEntryValue(bytes.substr(0, bytes.size() - 1), &back));
  EXPECT_FALSE(DecodeEntryValue("\x80", &back));
  EXPECT_FALSE(DecodeEntryValue(std::string("\x01\x01\x00", 3), &back));
}

TEST(EntryValueTest, RecordsPastSixtyFourBytesAreDropped) {
  EntryValue v;
  v.refs = 1;
  v.size = 100;
  for (int k = 0; k < 10; ++k) {
    v.hints.push_back({HintTag(std::to_string(k)), {100000u + k}, {1, 2, 3}});
  }
  const std::string bytes = EncodeEntryValue(v);
  EXPECT_LE(bytes.size(), kMaxValueBytes);
  EntryValue back;
  ASSERT_TRUE(DecodeEntryValue(bytes, &back));
  ASSERT_GT(back.hints.size(), 3u);
  ASSERT_LT(back.hints.size(), 10u);
  EXPECT_EQ(back.hints[0].tag, HintTag("0")) << "the most recent kept";
}

TEST(HintTagTest, FourBytesPerKey) {
  EXPECT_EQ(HintTag("fastcdc").size(), 4u);
  EXPECT_NE(HintTag("fastcdc"), HintTag("fastcdd"));
  EXPECT_EQ(HintTag(""), std::string("\x81\x1c\x9d\xc5", 4));  // FNV-1a basis
}

TEST(LayoutRecordTest, ParsesAndNamesAMalformedField) {
  auto r = ParseLayoutRecord(
      {"version", "2", "bucket_bits", "20", "migrating", "legacy"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 2);
  EXPECT_EQ(r->bucket_bits, 20);
  EXPECT_TRUE(r->migrating);
  EXPECT_EQ(r->migrating_from, "legacy");
  EXPECT_EQ(ParseLayoutRecord({})->version, 0);
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"version", "x"}, {"bucket_bits", "7"}, {"bucket_bits", "33"}}) {
    auto status = ParseLayoutRecord(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("malformed " + bad[0]), std::string::npos)
        << status;
  }
}

TEST(LegacyTest, KeysAndSizes) {
  EXPECT_EQ(LegacyEntryKey("ns", "fp"), "chunkd:ns:fp");
  EXPECT_EQ(LegacyHintListField("fastcdc:1:2:3"), "h:fastcdc:1:2:3");
  EXPECT_EQ(LegacyHintRunField("fastcdc:1:2:3"), "r:fastcdc:1:2:3");
  std::vector<uint32_t> sizes;
  EXPECT_TRUE(ParseLegacySizes("16384,20480", &sizes));
  EXPECT_EQ(sizes, (std::vector<uint32_t>{16384, 20480}));
  EXPECT_FALSE(ParseLegacySizes("1,x", &sizes));
}

}  // namespace
}  // namespace chunkd::index
