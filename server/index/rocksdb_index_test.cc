// What the RocksDB index adds to the contract (index_contract_test.cc runs
// the contract over it): everything survives closing and reopening, one
// process per directory, the format version, checkpoints, the spec.
#include "index/rocksdb_index.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/utilities/options_util.h"

namespace chunkd::index {
namespace {

class RocksDbIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "rocksdb_index_test.", getpid(),
                        ".", info->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<FingerprintIndex> Open(const std::string& query = "",
                                         IndexOptions options = {}) {
    auto index = CreateIndex(absl::StrCat("rocksdb://", dir_, query), options);
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? *std::move(index) : nullptr;
  }

  std::string dir_;
};

std::string Fp(int i) { return std::string(31, 'f') + static_cast<char>(i); }

TEST_F(RocksDbIndexTest, EverythingSurvivesReopening) {
  const WriteToken token{"stream-1", 0};
  {
    auto index = Open();
    ASSERT_NE(index, nullptr);
    ASSERT_TRUE(index->Insert("ns", {{Fp(1), 100}, {Fp(2), 200}}, &token).ok());
    ASSERT_TRUE(index->Insert("ns", {{Fp(1), 100}}).ok());
    ASSERT_TRUE(
        index->RecordNextSizes("ns", "p", {NextSize(Fp(1), 200, {7, 8})}).ok());
    EXPECT_EQ(index->EntryCount(), 2u);
  }
  auto index = Open();
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->EntryCount(), 2u);
  auto found = index->Lookup("ns", {Fp(1), Fp(2), Fp(3)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, true, false}));
  auto hints = index->NextHintsOf("ns", "p", {Fp(1)});
  ASSERT_TRUE(hints.ok());
  EXPECT_EQ((*hints)[0].sizes, (std::vector<uint32_t>{200}));
  EXPECT_EQ((*hints)[0].run, (std::vector<uint32_t>{7, 8}));
  // The token's positions replay what they returned before the restart.
  auto replay = index->Insert("ns", {{Fp(1), 100}, {Fp(2), 200}}, &token);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE((*replay)[0].is_new);
  EXPECT_EQ((*replay)[0].ref_count, 1u);
  auto left = index->Release("ns", {Fp(1), Fp(1), Fp(2)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (std::vector<uint64_t>{1, 0, 0}));
  EXPECT_EQ(index->EntryCount(), 0u);
}

TEST_F(RocksDbIndexTest, TheEntryLimitCountsEntriesOfEarlierRuns) {
  IndexOptions options;
  options.max_entries = 2;
  {
    auto index = Open("", options);
    ASSERT_TRUE(index->Insert("ns", {{Fp(1), 1}, {Fp(2), 1}}).ok());
  }
  auto index = Open("", options);
  auto refused = index->Insert("ns", {{Fp(3), 1}});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "--index_max_entries"));
  EXPECT_EQ(index->Health().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(RocksDbIndexTest, ASecondProcessOnTheDirectoryIsRefused) {
  auto first = Open();
  ASSERT_NE(first, nullptr);
  auto second = CreateIndex(absl::StrCat("rocksdb://", dir_));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(second.status().message(), dir_))
      << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "in use"))
      << second.status();
}

// Opens the database with RocksDB alone and sets the format key.
void SetFormat(const std::string& dir, const std::string& version) {
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  ASSERT_TRUE(rocksdb::LoadLatestOptions(rocksdb::ConfigOptions(), dir,
                                         &db_options, &families)
                  .ok());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  ASSERT_TRUE(
      rocksdb::DB::Open(db_options, dir, families, &handles, &db).ok());
  EXPECT_TRUE(db->Put(rocksdb::WriteOptions(), "chunkd.format", version).ok());
  for (auto* h : handles) EXPECT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  delete db;
}

TEST_F(RocksDbIndexTest, ANewerFormatIsRefused) {
  {
    auto index = Open();
    ASSERT_NE(index, nullptr);
    ASSERT_TRUE(index->Insert("ns", {{Fp(1), 1}}).ok());
  }
  SetFormat(dir_, absl::StrCat(kRocksDbFormatVersion + 1));
  auto index = CreateIndex(absl::StrCat("rocksdb://", dir_));
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(index.status().message(), "newer chunkd"))
      << index.status();
}

TEST_F(RocksDbIndexTest, ACheckpointOpensAsAnIndex) {
  std::string checkpoint;
  {
    auto index = Open(absl::StrCat("?checkpoint_dir=", dir_, ".cp"));
    ASSERT_TRUE(index->Insert("ns", {{Fp(1), 1}, {Fp(1), 1}}).ok());
    auto made = index->Checkpoint();
    ASSERT_TRUE(made.ok()) << made.status();
    checkpoint = *made;
    EXPECT_TRUE(absl::StartsWith(checkpoint, dir_ + ".cp/"));
    // Later writes are not in it.
    ASSERT_TRUE(index->Insert("ns", {{Fp(2), 1}}).ok());
  }
  auto copy = CreateIndex(absl::StrCat("rocksdb://", checkpoint));
  ASSERT_TRUE(copy.ok()) << copy.status();
  auto found = (*copy)->Lookup("ns", {Fp(1), Fp(2)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
  auto left = (*copy)->Release("ns", {Fp(1)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ((*left)[0], 1u);
  std::filesystem::remove_all(dir_ + ".cp");
}

TEST_F(RocksDbIndexTest, StorageFiguresAreReported) {
  auto index = Open("?sync=always");
  ASSERT_TRUE(index->Insert("ns", {{Fp(1), 1}}).ok());
  auto found = index->Lookup("ns", {Fp(1)});
  ASSERT_TRUE(found.ok());
  auto stats = index->Storage();
  ASSERT_TRUE(stats.has_value());
  EXPECT_GT(stats->disk_bytes, 0u);
  EXPECT_EQ(stats->cache_capacity, uint64_t{256} << 20);
  EXPECT_EQ(index->backend(), "rocksdb");
}

TEST(RocksDbSpecTest, ParsesAndRefuses) {
  auto options = ParseRocksDbSpec(
      "rocksdb:///var/x/?sync=always&sync_interval_ms=5&cache_mib=64&"
      "checkpoint_dir=/backups");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->path, "/var/x");
  EXPECT_EQ(options->sync, RocksDbSync::kAlways);
  EXPECT_EQ(options->sync_interval, absl::Milliseconds(5));
  EXPECT_EQ(options->cache_bytes, uint64_t{64} << 20);
  EXPECT_EQ(options->checkpoint_dir, "/backups");
  EXPECT_EQ(ParseRocksDbSpec("rocksdb:///x")->sync, RocksDbSync::kBatch);
  for (const char* bad :
       {"rocksdb://relative", "rocksdb:///", "rocksdb:///x?sync=sometimes",
        "rocksdb:///x?cache_mib=0", "rocksdb:///x?cache_mib=lots",
        "rocksdb:///x?colour=blue", "rocksdb:///x?checkpoint_dir=rel"}) {
    auto parsed = ParseRocksDbSpec(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), "--index"))
        << parsed.status();
  }
}

}  // namespace
}  // namespace chunkd::index
