// The FingerprintIndex contract, run against every backend (DESIGN.md §5).
// Backends that need a server (Redis) join this suite by adding a factory to
// kBackends when they are built.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "index/memory_index.h"

namespace chunkd::index {
namespace {

struct Backend {
  std::string name;
  std::function<std::unique_ptr<FingerprintIndex>()> make;
};

const std::vector<Backend>& Backends() {
  static const auto* backends = new std::vector<Backend>{
      {"memory", [] { return std::make_unique<MemoryIndex>(); }},
  };
  return *backends;
}

class IndexContractTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { index_ = GetParam().make(); }
  std::unique_ptr<FingerprintIndex> index_;
};

std::string Fp(int i) { return std::string(32, static_cast<char>(i)); }

TEST_P(IndexContractTest, InsertThenLookup) {
  auto missing = index_->Lookup("ns", {Fp(1), Fp(2)});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, (std::vector<bool>{false, false}));

  auto ins = index_->Insert("ns", {{Fp(1), 100}});
  ASSERT_TRUE(ins.ok());
  ASSERT_EQ(ins->size(), 1u);
  EXPECT_TRUE((*ins)[0].is_new);
  EXPECT_EQ((*ins)[0].ref_count, 1u);

  auto found = index_->Lookup("ns", {Fp(1), Fp(2)});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, (std::vector<bool>{true, false}));
}

TEST_P(IndexContractTest, SecondInsertIsDuplicateAndCounts) {
  ASSERT_TRUE(index_->Insert("ns", {{Fp(1), 10}}).ok());
  auto again = index_->Insert("ns", {{Fp(1), 10}, {Fp(1), 10}});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)[0].is_new);
  EXPECT_EQ((*again)[0].ref_count, 2u);
  EXPECT_FALSE((*again)[1].is_new);
  EXPECT_EQ((*again)[1].ref_count, 3u);
}

TEST_P(IndexContractTest, DuplicateWithinOneBatchIsNewOnce) {
  auto ins = index_->Insert("ns", {{Fp(7), 1}, {Fp(7), 1}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
  EXPECT_FALSE((*ins)[1].is_new);
}

TEST_P(IndexContractTest, NamespacesDoNotShareEntries) {
  ASSERT_TRUE(index_->Insert("tenant-a", {{Fp(3), 5}}).ok());
  auto other = index_->Lookup("tenant-b", {Fp(3)});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)[0]);
  auto ins = index_->Insert("tenant-b", {{Fp(3), 5}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
}

TEST_P(IndexContractTest, ReleaseDecrementsAndRemovesAtZero) {
  ASSERT_TRUE(index_->Insert("ns", {{Fp(4), 1}, {Fp(4), 1}}).ok());
  auto left = index_->Release("ns", {Fp(4)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ((*left)[0], 1u);
  left = index_->Release("ns", {Fp(4), Fp(5)});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, (std::vector<uint64_t>{0, 0}));
  auto found = index_->Lookup("ns", {Fp(4)});
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE((*found)[0]);
  auto ins = index_->Insert("ns", {{Fp(4), 1}});
  ASSERT_TRUE(ins.ok());
  EXPECT_TRUE((*ins)[0].is_new);
}

TEST_P(IndexContractTest, RacingInsertsSeeExactlyOneNew) {
  constexpr int kThreads = 8;
  constexpr int kFingerprints = 2000;
  std::vector<InsertEntry> batch;
  for (int i = 0; i < kFingerprints; ++i) {
    batch.push_back({std::to_string(i) + std::string(24, 'x'), 4096});
  }
  std::vector<std::atomic<int>> news(kFingerprints);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto r = index_->Insert("race", batch);
      ASSERT_TRUE(r.ok());
      for (int i = 0; i < kFingerprints; ++i) {
        if ((*r)[i].is_new) news[i].fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kFingerprints; ++i) {
    ASSERT_EQ(news[i].load(), 1) << "fingerprint " << i;
  }
  auto again = index_->Insert("race", {batch[0]});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].ref_count, kThreads + 1u);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, IndexContractTest,
                         ::testing::ValuesIn(Backends()),
                         [](const auto& info) { return info.param.name; });

TEST(NamespaceTest, AcceptsAndRejects) {
  EXPECT_TRUE(ValidateNamespace("backup-2024.v1_a").ok());
  EXPECT_FALSE(ValidateNamespace("").ok());
  EXPECT_FALSE(ValidateNamespace(std::string(kMaxNamespaceLength + 1, 'a')).ok());
  auto colon = ValidateNamespace("a:b");
  EXPECT_EQ(colon.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(colon.message().find("namespace"), std::string::npos);
  EXPECT_FALSE(ValidateNamespace("a{b}").ok());
}

TEST(CreateIndexTest, KnowsMemoryOnly) {
  auto mem = CreateIndex("memory");
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ((*mem)->backend(), "memory");
  auto bad = CreateIndex("cassandra://x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--index"), std::string::npos);
}

}  // namespace
}  // namespace chunkd::index
