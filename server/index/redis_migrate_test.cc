// Moving an index from the key-per-entry layout of chunkd 0.3 to buckets,
// and between bucket_bits, on real redis-servers: every count and hint
// survives, a stopped migration resumes, a running index pauses while it
// runs and follows it, and a database of the old layout is refused with a
// message naming the command.
#include "index/redis_migrate.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "index/redis_config.h"
#include "index/redis_index.h"
#include "index/redis_layout.h"
#include "support/redis_process.h"

namespace chunkd::index {
namespace {

using testing::DirectRedis;
using testing::RedisClusterProcesses;
using testing::RedisProcess;

// A fingerprint: 32 bytes that differ everywhere.
std::string Fp(uint64_t i) {
  std::string fp(32, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
  for (char& c : fp) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    c = static_cast<char>(x >> 56);
  }
  return fp;
}

std::unique_ptr<RedisIndex> MakeIndex(const std::string& spec, bool legacy) {
  auto config = ParseRedisSpec(spec, IndexOptions());
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  config->legacy_layout = legacy;
  return std::make_unique<RedisIndex>(*std::move(config));
}

MigrateOptions Quick() {
  MigrateOptions options;
  options.settle = absl::ZeroDuration();
  return options;
}

// Entry i is inserted (i % 3) + 1 times; every fifth has hints under "p"
// (next size 1000 + i, run {1, 2, 3}) and every tenth under "q" too.
constexpr int kEntries = 3000;

void Fill(FingerprintIndex& index) {
  for (int round = 0; round < 3; ++round) {
    std::vector<InsertEntry> batch;
    for (int i = 0; i < kEntries; ++i) {
      if (i % 3 >= round) batch.push_back({Fp(i), 4096u + i});
    }
    for (size_t at = 0; at < batch.size(); at += 256) {
      const size_t n = std::min<size_t>(256, batch.size() - at);
      const WriteToken token{absl::StrCat("fill", round), at};
      ASSERT_TRUE(
          index.Insert("ns", absl::MakeSpan(batch).subspan(at, n), &token)
              .ok());
    }
  }
  std::vector<NextSize> p, q;
  for (int i = 0; i < kEntries; i += 5) p.push_back({Fp(i), 1000u + i, {1, 2, 3}});
  for (int i = 0; i < kEntries; i += 10) q.push_back({Fp(i), 7});
  ASSERT_TRUE(index.RecordNextSizes("ns", "p", p).ok());
  ASSERT_TRUE(index.RecordNextSizes("ns", "q", q).ok());
}

// Everything Fill wrote reads back: hints, then counts through releases
// (which remove every entry).
void ExpectFilled(FingerprintIndex& index) {
  std::vector<std::string> fps;
  for (int i = 0; i < kEntries; ++i) fps.push_back(Fp(i));
  auto p = index.NextHintsOf("ns", "p", fps);
  auto q = index.NextHintsOf("ns", "q", fps);
  ASSERT_TRUE(p.ok() && q.ok()) << p.status() << q.status();
  for (int i = 0; i < kEntries; ++i) {
    if (i % 5 == 0) {
      EXPECT_EQ((*p)[i].sizes, std::vector<uint32_t>{1000u + i}) << i;
      EXPECT_EQ((*p)[i].run, (std::vector<uint32_t>{1, 2, 3})) << i;
    } else {
      EXPECT_TRUE((*p)[i].sizes.empty()) << i;
    }
    EXPECT_EQ((*q)[i].sizes.size(), i % 10 == 0 ? 1u : 0u) << i;
  }
  for (int k = 2; k >= 0; --k) {
    auto left = index.Release("ns", fps);
    ASSERT_TRUE(left.ok()) << left.status();
    for (int i = 0; i < kEntries; ++i) {
      ASSERT_EQ((*left)[i], static_cast<uint64_t>(std::max(i % 3 - (2 - k), 0)))
          << "fingerprint " << i << " round " << k;
    }
  }
  auto found = index.Lookup("ns", fps);
  ASSERT_TRUE(found.ok());
  for (bool f : *found) EXPECT_FALSE(f);
}

long long Keys(int port, const std::string& pattern) {
  auto direct = DirectRedis::Connect("127.0.0.1", port);
  EXPECT_TRUE(direct.ok());
  if (!direct.ok()) return -1;
  long long n = 0;
  std::string cursor = "0";
  for (int i = 0; i < 100000; ++i) {
    auto page = (*direct)->Command(
        {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    EXPECT_TRUE(page.ok());
    if (!page.ok()) return -1;
    cursor.assign((*page)->element[0]->str, (*page)->element[0]->len);
    n += static_cast<long long>((*page)->element[1]->elements);
    if (cursor == "0") break;
  }
  return n;
}

class RedisMigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisProcess::Start({});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    spec_ = absl::StrCat("redis://", server_->address());
  }

  std::unique_ptr<RedisProcess> server_;
  std::string spec_;
};

TEST_F(RedisMigrateTest, AnIndexOfTheOldLayoutIsRefusedNamingTheCommand) {
  auto legacy = MakeIndex(spec_, /*legacy=*/true);
  ASSERT_TRUE(legacy->Insert("ns", {{Fp(1), 10}}).ok());
  auto index = CreateIndex(spec_);
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(index.status().message(),
                                "run `chunkctl index migrate --index="))
      << index.status();
  EXPECT_TRUE(absl::StrContains(index.status().message(), server_->address()))
      << index.status();
}

TEST_F(RedisMigrateTest, MovesCountsAndHintsIntoBuckets) {
  auto legacy = MakeIndex(spec_, /*legacy=*/true);
  Fill(*legacy);
  auto moved = MigrateRedisIndex(*MakeIndex(spec_, false), Quick());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->from, "legacy");
  EXPECT_EQ(moved->bucket_bits, kDefaultBucketBits);
  EXPECT_EQ(moved->keys, static_cast<uint64_t>(kEntries));
  EXPECT_EQ(moved->entries, static_cast<uint64_t>(kEntries));
  EXPECT_EQ(Keys(server_->port(), kLegacyKeyPattern), 0);
  // The write-token records stay and still answer replays.
  auto index = CreateIndex(spec_);
  ASSERT_TRUE(index.ok()) << index.status();
  const WriteToken token{"fill0", 0};
  auto replay = (*index)->Insert("ns", {{Fp(0), 4096}}, &token);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ((*replay)[0].ref_count, 1u) << "answered from the record";
  ExpectFilled(**index);
  // Again: nothing left to move.
  auto again = MigrateRedisIndex(*MakeIndex(spec_, false), Quick());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->keys, 0u);
}

TEST_F(RedisMigrateTest, AStoppedMigrationPausesTheIndexAndResumes) {
  Fill(*MakeIndex(spec_, /*legacy=*/true));
  MigrateOptions stop = Quick();
  stop.stop_after_keys = 1000;
  uint64_t moved_first = 0;
  stop.progress = [&](const MigrateProgress& p) { moved_first = p.keys; };
  auto stopped = MigrateRedisIndex(*MakeIndex(spec_, false), stop);
  ASSERT_EQ(stopped.status().code(), absl::StatusCode::kAborted);
  // Half moved: chunkd starts, and refuses index calls until it is done.
  auto index = CreateIndex(spec_);
  ASSERT_TRUE(index.ok()) << index.status();
  auto refused = (*index)->Lookup("ns", {Fp(1)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "chunkctl index migrate"))
      << refused.status();
  EXPECT_EQ((*index)->Health().code(), absl::StatusCode::kUnavailable);

  auto resumed = MigrateRedisIndex(*MakeIndex(spec_, false), Quick());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_GE(moved_first, 1000u);
  EXPECT_EQ(resumed->keys, kEntries - moved_first) << "the rest";
  EXPECT_TRUE((*index)->Health().ok()) << (*index)->Health();
  ExpectFilled(**index);
}

// A running index follows a change of bucket_bits: paused while the
// migration is marked, on the new buckets after it.
TEST_F(RedisMigrateTest, ARunningIndexFollowsNewBucketBits) {
  auto index = CreateIndex(spec_);
  ASSERT_TRUE(index.ok()) << index.status();
  Fill(**index);
  const long long buckets = Keys(server_->port(), "chunkd-b18:*");
  EXPECT_GT(buckets, kEntries * 9 / 10) << "3000 in 2^18 buckets: few share";
  EXPECT_LE(buckets, kEntries);

  auto direct = DirectRedis::Connect("127.0.0.1", server_->port());
  ASSERT_TRUE(direct.ok());
  ASSERT_TRUE((*direct)->Command({"HSET", kLayoutKey, "migrating", "18"}).ok());
  EXPECT_EQ((*index)->Health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*index)->Lookup("ns", {Fp(1)}).status().code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE((*direct)->Command({"HDEL", kLayoutKey, "migrating"}).ok());

  MigrateOptions rehash = Quick();
  rehash.bucket_bits = 8;
  auto moved = MigrateRedisIndex(*MakeIndex(spec_, false), rehash);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->from, "18");
  EXPECT_EQ(moved->entries, static_cast<uint64_t>(kEntries));
  EXPECT_EQ(Keys(server_->port(), "chunkd-b18:*"), 0);
  EXPECT_EQ(Keys(server_->port(), "chunkd-b8:*"), 256);
  ASSERT_TRUE((*index)->Health().ok()) << (*index)->Health();
  ExpectFilled(**index);

  // A later ?bucket_bits= that differs is ignored, with a warning.
  std::vector<std::string> warnings;
  IndexOptions options;
  options.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto asked = CreateIndex(absl::StrCat(spec_, "?bucket_bits=20"), options);
  ASSERT_TRUE(asked.ok()) << asked.status();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(warnings[0],
                                "has bucket_bits 8 (key chunkd-layout), not "
                                "the 20 asked for"))
      << warnings[0];
}

TEST(RedisClusterMigrateTest, MovesEveryMastersEntries) {
  auto cluster = RedisClusterProcesses::Start(3, 0);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string spec = (*cluster)->Spec();
  Fill(*MakeIndex(spec, /*legacy=*/true));
  auto moved = MigrateRedisIndex(*MakeIndex(spec, false), Quick());
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->keys, static_cast<uint64_t>(kEntries));
  auto masters = (*cluster)->MasterPorts();
  ASSERT_TRUE(masters.ok());
  ASSERT_EQ(masters->size(), 3u);
  for (int port : *masters) {
    EXPECT_EQ(Keys(port, kLegacyKeyPattern), 0) << port;
    EXPECT_GT(Keys(port, "chunkd-b18:*"), kEntries / 4) << port;
  }
  auto index = CreateIndex(spec);
  ASSERT_TRUE(index.ok()) << index.status();
  ExpectFilled(**index);
}

}  // namespace
}  // namespace chunkd::index
