#include "clients/cli/size.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "clients/cli/args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTB = 1'000'000'000'000;
constexpr uint64_t kPB = 1'000'000'000'000'000;

uint64_t Size(const std::string& text) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  EXPECT_TRUE(bytes.ok()) << text << ": " << bytes.status();
  return bytes.value_or(0);
}

TEST(SizeTest, ParsesEveryUnit) {
  EXPECT_EQ(Size("1"), 1u);
  EXPECT_EQ(Size("7B"), 7u);
  EXPECT_EQ(Size("1KB"), 1'000u);
  EXPECT_EQ(Size("1MB"), 1'000'000u);
  EXPECT_EQ(Size("1GB"), 1'000'000'000u);
  EXPECT_EQ(Size("1TB"), kTB);
  EXPECT_EQ(Size("1PB"), kPB);
  EXPECT_EQ(Size("1KiB"), 1024u);
  EXPECT_EQ(Size("1MiB"), uint64_t{1} << 20);
  EXPECT_EQ(Size("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(Size("1TiB"), uint64_t{1} << 40);
  EXPECT_EQ(Size("1PiB"), uint64_t{1} << 50);
  // Any case, a space or none, surrounding blanks.
  EXPECT_EQ(Size("64kib"), 64 * kKiB);
  EXPECT_EQ(Size("64 KiB"), 64 * kKiB);
  EXPECT_EQ(Size(" 500tb "), 500 * kTB);
}

TEST(SizeTest, ParsesDecimals) {
  EXPECT_EQ(Size("1.5PB"), 1'500'000'000'000'000u);
  EXPECT_EQ(Size("1.5KiB"), 1536u);
  EXPECT_EQ(Size("0.25GiB"), kGiB / 4);
  EXPECT_EQ(Size(".5KB"), 500u);
  EXPECT_EQ(Size("2.KB"), 2'000u);
  EXPECT_EQ(Size("0.001PB"), kTB);
  // Rounded to the nearest byte: 1.3 KiB is 1331.2 bytes, 1.7 B is 2.
  EXPECT_EQ(Size("1.3KiB"), 1331u);
  EXPECT_EQ(Size("1.7"), 2u);
  EXPECT_EQ(Size("10000PB"), kMaxSizeBytes);
}

TEST(SizeTest, RefusesBadSizes) {
  for (const char* text :
       {"", "KB", "5XB", "5 K", "1e3", "-5", "1.5.3", "1,5GB", "five", ".",
        "5KB5", "0", "0.0001B", "10001PB", "99999999999999999999",
        "10000.000000000000001PB"}) {
    absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument)
        << text;
    EXPECT_THAT(bytes.status().message(),
                HasSubstr("expected a size such as 500TB, 1.5PB or 64KiB"))
        << text;
    EXPECT_THAT(bytes.status().message(), HasSubstr("KiB, MiB, GiB"));
    EXPECT_THAT(bytes.status().message(),
                HasSubstr(absl::StrCat("got \"", text, "\"")));
  }
  EXPECT_THAT(ParseByteSize("0KB").status().message(), HasSubstr("0 bytes"));
  EXPECT_THAT(ParseByteSize("10001PB").status().message(),
              HasSubstr("more than 10000PB"));
}

TEST(SizeTest, Entries) {
  // 1 PB at 16 KiB: 10^15 / 16384, exactly.
  EXPECT_EQ(SizeEntries(kPB, 16 * kKiB), 61'035'156'250u);
  // 500 TB at 64 KiB is 7,629,394,531.25: a partial chunk is an entry.
  EXPECT_EQ(SizeEntries(500 * kTB, 64 * kKiB), 7'629'394'532u);
  EXPECT_EQ(SizeEntries(1, 16 * kKiB), 1u);
  EXPECT_EQ(SizeEntries(16 * kKiB, 16 * kKiB), 1u);
  EXPECT_EQ(SizeEntries(kMaxSizeBytes, 1), kMaxSizeBytes);
}

TEST(SizeTest, BucketBits) {
  // max(18, ceil(log2(entries / 64))).
  EXPECT_EQ(RedisBucketBits(0), 18);
  EXPECT_EQ(RedisBucketBits(1'000'000), 18);
  EXPECT_EQ(RedisBucketBits(10'000'000), 18);
  EXPECT_EQ(RedisBucketBits(64u << 18), 18);
  EXPECT_EQ(RedisBucketBits((64u << 18) + 1), 19);
  EXPECT_EQ(RedisBucketBits(61'035'156'250), 30);  // 1 PB at 16 KiB
  EXPECT_EQ(RedisBucketBits(uint64_t{64} << 27), 27);
  // At most 2^32 buckets: then they average more than 64.
  EXPECT_EQ(RedisBucketBits(uint64_t{64} << 32), 32);
  EXPECT_EQ(RedisBucketBits((uint64_t{64} << 32) + 1), 32);
  EXPECT_EQ(RedisBucketBits(kMaxSizeBytes), 32);
}

TEST(SizeTest, SaysWhenBucketsCannotStaySmall) {
  SizeConfig config;
  config.data_bytes = 10 * kPB;
  config.avg_bytes = 4 * kKiB;  // 2,441,406,250,000 entries
  config.indexes = {SizedIndex::kRedisCluster};
  const std::string text = FormatSizeEstimate(config);
  EXPECT_THAT(text, HasSubstr("?bucket_bits=32 (568 entries a bucket"));
  EXPECT_THAT(text, HasSubstr("more than 64 even at the most buckets: "
                              "spread the data over\n               "
                              "namespaces of at most 274,877,906,944 "
                              "entries\n"));
  config.data_bytes = kPB;
  EXPECT_THAT(FormatSizeEstimate(config), Not(HasSubstr("more than 64")));
  config.format = OutputFormat::kJson;
  EXPECT_THAT(FormatSizeEstimate(config),
              HasSubstr("\"bucket_bits\":32,\"entries_per_bucket\":56.8}"));
}

TEST(SizeTest, RedisServers) {
  // 48 GiB of a 64 GiB server hold data.
  EXPECT_EQ(RedisServersFor(0, 64 * kGiB), 1u);
  EXPECT_EQ(RedisServersFor(48.0 * kGiB, 64 * kGiB), 1u);
  EXPECT_EQ(RedisServersFor(48.0 * kGiB + 1, 64 * kGiB), 2u);
  // 1 PB at 16 KiB, 60 bytes an entry: 3.66 TB, 71.05 servers of 48 GiB.
  EXPECT_EQ(RedisServersFor(61'035'156'250.0 * 60, 64 * kGiB), 72u);
}

TEST(SizeTest, EntryCostIsTheNearestMeasurementBelow) {
  const EntryCost small = EntryCostFor(SizedIndex::kMemory, 1'000);
  const EntryCost million = EntryCostFor(SizedIndex::kMemory, 9'999'999);
  const EntryCost large = EntryCostFor(SizedIndex::kMemory, 61'035'156'250);
  EXPECT_EQ(small.measured_at, 1'000'000u);
  EXPECT_EQ(million.measured_at, 1'000'000u);
  EXPECT_EQ(large.measured_at, 10'000'000u);
  EXPECT_EQ(small.bytes, 53);
  EXPECT_EQ(small.bytes_hints, 126);
  EXPECT_EQ(large.bytes, 49);
  EXPECT_EQ(large.bytes_hints, 117);
  EXPECT_EQ(EntryCostFor(SizedIndex::kRocksDb, 1'000).bytes, 37.2);
  EXPECT_EQ(EntryCostFor(SizedIndex::kRocksDb, 1'000).bytes_hints, 39.4);
  // Every index has a figure, and hints never cost less.
  for (SizedIndex index : {SizedIndex::kMemory, SizedIndex::kRocksDb,
                           SizedIndex::kRedis, SizedIndex::kRedisCluster}) {
    const EntryCost cost = EntryCostFor(index, 1'000'000'000);
    EXPECT_GT(cost.bytes, 0) << SizedIndexName(index);
    EXPECT_GE(cost.bytes_hints, cost.bytes) << SizedIndexName(index);
  }
  EXPECT_EQ(EntryCostFor(SizedIndex::kRedisCluster, 1).bytes,
            EntryCostFor(SizedIndex::kRedis, 1).bytes);
}

absl::StatusOr<SizeConfig> Config(const std::vector<std::string>& words) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(words, SizeFlagSpecs());
  if (!args.ok()) return args.status();
  return SizeConfigFromArgs(*args);
}

TEST(SizeTest, Flags) {
  absl::StatusOr<SizeConfig> config = Config({"--data", "1PB"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->data_bytes, kPB);
  EXPECT_EQ(config->avg_bytes, 16 * kKiB);
  EXPECT_EQ(config->indexes.size(), 4u);
  EXPECT_FALSE(config->hints);
  EXPECT_EQ(config->redis_master_memory, 64 * kGiB);
  EXPECT_EQ(config->format, OutputFormat::kText);

  config = Config({"--data=500TB", "--avg", "64KiB", "--index", "redis",
                   "--hints", "--redis-master-memory", "128GiB", "--json"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->avg_bytes, 64 * kKiB);
  EXPECT_EQ(config->indexes, std::vector<SizedIndex>{SizedIndex::kRedis});
  EXPECT_TRUE(config->hints);
  EXPECT_EQ(config->redis_master_memory, 128 * kGiB);
  EXPECT_EQ(config->format, OutputFormat::kJson);
}

TEST(SizeTest, BadFlagsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing --data SIZE"},
      {{"--avg", "64KiB"}, "missing --data SIZE"},
      {{"--data", "5XB"}, "--data: expected a size such as 500TB"},
      {{"--data", "1PB", "--avg", "0"}, "--avg: 0 bytes; expected a size"},
      {{"--data", "1PB", "--redis-master-memory", "lots"},
       "--redis-master-memory: expected a size"},
      {{"--data", "1PB", "--index", "etcd"},
       "--index: expected memory, rocksdb, redis, redis-cluster or all, got "
       "\"etcd\""},
      {{"--data", "1PB", "--format", "xml"}, "--format"},
      {{"--data", "1PB", "extra"}, "unexpected argument \"extra\""},
  };
  for (const auto& [words, message] : cases) {
    absl::StatusOr<SizeConfig> config = Config(words);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument)
        << message;
    EXPECT_THAT(config.status().message(), HasSubstr(message));
  }
}

SizeConfig OnePetabyte(SizedIndex index) {
  SizeConfig config;
  config.data_bytes = kPB;
  config.avg_bytes = 16 * kKiB;
  config.indexes = {index};
  return config;
}

TEST(SizeTest, TextOfEachIndex) {
  const std::string memory =
      FormatSizeEstimate(OnePetabyte(SizedIndex::kMemory));
  EXPECT_THAT(memory,
              HasSubstr("entries        61,035,156,250, one per unique"));
  EXPECT_THAT(memory, HasSubstr("duplicate data adds no entries"));
  // 61,035,156,250 x 49 bytes = 2.72 TiB.
  EXPECT_THAT(memory, HasSubstr("memory         49 bytes an entry resident "
                                "(measured at 10M entries)"));
  EXPECT_THAT(memory, HasSubstr("2.7 TiB: more than 1 TiB, past one machine"));
  EXPECT_THAT(memory, HasSubstr("--index_max_entries 61035156250"));
  EXPECT_THAT(memory, Not(HasSubstr("Redis")));

  SizeConfig small = OnePetabyte(SizedIndex::kMemory);
  small.data_bytes = kTB;
  EXPECT_THAT(FormatSizeEstimate(small), HasSubstr(": fits one machine"));

  SizeConfig rocksdb = OnePetabyte(SizedIndex::kRocksDb);
  rocksdb.hints = true;
  // 61,035,156,250 x 39.4 bytes = 2.19 TiB.
  EXPECT_THAT(FormatSizeEstimate(rocksdb),
              HasSubstr("rocksdb        39.4 bytes an entry on disk"));
  EXPECT_THAT(FormatSizeEstimate(rocksdb), HasSubstr("disk         2.2 TiB"));

  const EntryCost redis = EntryCostFor(SizedIndex::kRedis, 61'035'156'250);
  const uint64_t masters =
      RedisServersFor(61'035'156'250.0 * redis.bytes, 64 * kGiB);
  const std::string cluster =
      FormatSizeEstimate(OnePetabyte(SizedIndex::kRedisCluster));
  EXPECT_THAT(cluster, HasSubstr(absl::StrCat("masters      ", masters,
                                              " of 64.0 GiB")));
  EXPECT_THAT(cluster, HasSubstr(absl::StrCat("and ", masters, " more\n")));
  EXPECT_THAT(cluster, HasSubstr("?bucket_bits=30 (57 entries a bucket"));
  EXPECT_THAT(cluster, HasSubstr("Redis servers are counted 75 % full"));
  const std::string redis_text =
      FormatSizeEstimate(OnePetabyte(SizedIndex::kRedis));
  EXPECT_THAT(redis_text, HasSubstr(absl::StrCat("servers      ", masters,
                                                 " of 64.0 GiB (")));
  EXPECT_THAT(redis_text, HasSubstr(" entries each): use redis-cluster\n"));
}

TEST(SizeTest, ClusterHasThreeMastersAtLeast) {
  SizeConfig config = OnePetabyte(SizedIndex::kRedisCluster);
  config.data_bytes = kTB;
  config.format = OutputFormat::kJson;
  EXPECT_THAT(FormatSizeEstimate(config), HasSubstr("\"masters\":3,"));
  config.indexes = {SizedIndex::kRedis};
  EXPECT_THAT(FormatSizeEstimate(config), HasSubstr("\"servers\":1,"));
}

TEST(SizeTest, Json) {
  SizeConfig config = OnePetabyte(SizedIndex::kMemory);
  config.indexes = {SizedIndex::kMemory, SizedIndex::kRocksDb};
  config.format = OutputFormat::kJson;
  // 61,035,156,250 x 49 = 2,990,722,656,250; x 37.2 = 2,270,507,812,500.
  EXPECT_EQ(FormatSizeEstimate(config),
            "{\"data_bytes\":1000000000000000,\"avg_bytes\":16384,"
            "\"entries\":61035156250,\"hints\":false,"
            "\"redis_master_memory_bytes\":68719476736,"
            "\"redis_data_share\":0.75,\"indexes\":["
            "{\"index\":\"memory\",\"bytes_per_entry\":49,"
            "\"measured_at_entries\":10000000,"
            "\"memory_bytes\":2990722656250,\"fits_one_machine\":false},"
            "{\"index\":\"rocksdb\",\"bytes_per_entry\":37.2,"
            "\"measured_at_entries\":10000000,"
            "\"disk_bytes\":2270507812500}]}\n");
}

}  // namespace
}  // namespace chunkd::cli
