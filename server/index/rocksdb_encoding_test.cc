// The RocksDB index's byte formats (rocksdb_encoding.h).
#include "index/rocksdb_encoding.h"

#include "gtest/gtest.h"

namespace chunkd::index::rocksdb_format {
namespace {

TEST(RocksDbEncodingTest, EntryRoundTrips) {
  EntryValue entry{300000000000, 65536, {}};
  entry.hints.push_back({"fastcdc:4096:16384:65536:2:0", {{16384, 9000}, {1, 2, 3}}});
  entry.hints.push_back({"crc32:x", {{7}, {}}});
  EntryValue back;
  ASSERT_TRUE(DecodeEntry(EncodeEntry(entry), &back));
  EXPECT_EQ(back.refs, entry.refs);
  EXPECT_EQ(back.size, entry.size);
  ASSERT_EQ(back.hints.size(), 2u);
  EXPECT_EQ(back.hints[0].params_key, "fastcdc:4096:16384:65536:2:0");
  EXPECT_EQ(back.hints[0].hints.sizes, (std::vector<uint32_t>{16384, 9000}));
  EXPECT_EQ(back.hints[0].hints.run, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(back.hints[1].hints.sizes, (std::vector<uint32_t>{7}));
  // A plain entry is a few bytes: refs, size (3 bytes from 16 KiB on), no
  // lists.
  EXPECT_EQ(EncodeEntry({1, 16383, {}}).size(), 4u);
  EXPECT_EQ(EncodeEntry({1, 16384, {}}).size(), 5u);
}

TEST(RocksDbEncodingTest, RefusesDamagedEntries) {
  const std::string good = EncodeEntry({2, 100, {{"p", {{5}, {6}}}}});
  EntryValue back;
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeEntry(good.substr(0, n), &back)) << n;
  }
  EXPECT_FALSE(DecodeEntry(good + "x", &back));
  EXPECT_FALSE(DecodeEntry(std::string(12, '\xff'), &back));
}

TEST(RocksDbEncodingTest, HintsAreMostRecentFirstAndBounded) {
  EntryValue entry{1, 10, {}};
  AddHint(&entry, "p", NextSize("fp", 100, {1, 2, 3, 4, 5}), 2);
  AddHint(&entry, "p", NextSize("fp", 200, {7}), 2);
  ASSERT_EQ(entry.hints.size(), 1u);
  EXPECT_EQ(entry.hints[0].hints.sizes, (std::vector<uint32_t>{200, 100}));
  EXPECT_EQ(entry.hints[0].hints.run, (std::vector<uint32_t>{7}));
  AddHint(&entry, "p", NextSize("fp", 300, {}), 2);
  EXPECT_EQ(entry.hints[0].hints.sizes, (std::vector<uint32_t>{300, 200}));
  EXPECT_TRUE(entry.hints[0].hints.run.empty());
  AddHint(&entry, "p", NextSize("fp", 200, {1, 2, 3, 4}), 2);
  EXPECT_EQ(entry.hints[0].hints.sizes, (std::vector<uint32_t>{200, 300}));
  EXPECT_EQ(entry.hints[0].hints.run, (std::vector<uint32_t>{1, 2, 3}));
  // The same observation again changes nothing.
  EXPECT_FALSE(AddHint(&entry, "p", NextSize("fp", 200, {1, 2, 3, 4}), 2));
  EXPECT_TRUE(AddHint(&entry, "p", NextSize("fp", 200, {1, 2}), 2));
  EXPECT_TRUE(AddHint(&entry, "q", NextSize("fp", 5, {}), 2));
  ASSERT_EQ(entry.hints.size(), 2u);
  EXPECT_EQ(entry.hints[1].params_key, "q");
}

TEST(RocksDbEncodingTest, KeysDoNotCollideAcrossNamespaces) {
  // "ab" + fingerprint "c..." must differ from "a" + "bc...".
  EXPECT_NE(EntryKey("ab", "cd"), EntryKey("a", "bcd"));
  EXPECT_NE(TokenPrefix("ab", "c", 'i'), TokenPrefix("a", "bc", 'i'));
  EXPECT_NE(TokenPrefix("a", "b", 'i'), TokenPrefix("a", "b", 'r'));
}

TEST(RocksDbEncodingTest, TokenKeysSortByPosition) {
  const std::string prefix = TokenPrefix("ns", "stream", 'i');
  EXPECT_LT(TokenKey(prefix, 255), TokenKey(prefix, 256));
  EXPECT_LT(TokenKey(prefix, 1), TokenKey(prefix, uint64_t{1} << 40));
}

TEST(RocksDbEncodingTest, TokenRecordsRoundTripAndExpire) {
  const std::string prefix = TokenPrefix("ns", "stream", 'r');
  const absl::Time written = absl::FromUnixSeconds(1700000000);
  const std::string value = EncodeTokenValue(written, {5, 0, 1u << 20});
  TokenRecord record;
  ASSERT_TRUE(DecodeTokenRecord(TokenKey(prefix, 4096), value, prefix.size(),
                                &record));
  EXPECT_EQ(record.first, 4096u);
  EXPECT_EQ(record.results, (std::vector<uint64_t>{5, 0, 1u << 20}));
  EXPECT_FALSE(TokenExpired(value, written + absl::Minutes(10),
                            absl::Minutes(10)));
  EXPECT_TRUE(TokenExpired(value, written + absl::Minutes(10) +
                                      absl::Microseconds(1),
                           absl::Minutes(10)));
  EXPECT_TRUE(TokenExpired("short", written, absl::Minutes(10)));
  EXPECT_FALSE(DecodeTokenRecord(TokenKey(prefix, 1), value.substr(0, 9),
                                 prefix.size(), &record));
}

TEST(RocksDbEncodingTest, Fixed64AddsAsSignedDeltas) {
  const uint64_t minus_one = static_cast<uint64_t>(int64_t{-1});
  EXPECT_EQ(DecodeFixed64(EncodeFixed64(minus_one)) + 5, 4u);
  EXPECT_EQ(DecodeFixed64(EncodeFixed64(0x0102030405060708)),
            0x0102030405060708u);
  EXPECT_EQ(DecodeFixed64("1234567"), 0u);
}

}  // namespace
}  // namespace chunkd::index::rocksdb_format
