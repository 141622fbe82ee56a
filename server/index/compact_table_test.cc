// CompactTable: growth, removal by backward shift, reference counts past
// the slot's 32 bits, the hints flag, and keys that differ in one byte.
// MemoryIndex's behaviour through it is in memory_index_test.cc and
// index_contract_test.cc.
#include "index/compact_table.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::index {
namespace {

// An N-byte key, different everywhere for different i.
std::string Bytes(uint64_t i, size_t n) {
  std::string key(n, '\0');
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
  for (char& c : key) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    c = static_cast<char>(x >> 56);
  }
  return key;
}

// Owns the bytes a TableKey points at.
struct Key {
  std::string bytes;
  uint32_t ns_id;
  TableKey get() const {
    return {ns_id, bytes,
            CompactKeyHash(ns_id,
                           reinterpret_cast<const unsigned char*>(bytes.data()),
                           bytes.size())};
  }
};

auto Always() {
  return [] { return true; };
}

TEST(CompactTableTest, StartsEmptyAndGrowsWithinItsLoadBounds) {
  CompactTable<32> table;
  const Key absent{Bytes(0, 32), 1};
  EXPECT_FALSE(table.Contains(absent.get()));
  EXPECT_EQ(table.capacity(), 0u);
  constexpr int kKeys = 100000;
  std::vector<Key> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back({Bytes(i, 32), 1});
  for (int i = 0; i < kKeys; ++i) {
    auto added = table.Add(keys[i].get(), 4096, Always());
    ASSERT_TRUE(added.has_value());
    ASSERT_TRUE(added->is_new) << i;
    ASSERT_EQ(added->refs, 1u);
    ASSERT_EQ(table.size(), static_cast<size_t>(i + 1));
    ASSERT_LE(table.size(), table.capacity() * CompactTable<32>::kMaxLoad);
    // Once past the first few growths, never below kMaxLoad / kGrowth.
    if (table.capacity() > 1000) {
      ASSERT_GE(table.size() + 1, table.capacity() *
                                      CompactTable<32>::kMaxLoad /
                                      CompactTable<32>::kGrowth)
          << i;
    }
  }
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(table.Contains(keys[i].get())) << i;
    ASSERT_EQ(table.RefCount(keys[i].get()), 1u);
  }
  EXPECT_FALSE(table.Contains(Key{Bytes(kKeys, 32), 1}.get()));
  // 44-byte slots at least 72% full: at most 61.2 bytes per entry.
  EXPECT_EQ(sizeof(CompactTable<32>::Slot), 44u);
  EXPECT_LE(static_cast<double>(table.bytes()) / kKeys, 61.2);
}

TEST(CompactTableTest, SecondAddCountsAReference) {
  CompactTable<16> table;
  const Key key{Bytes(1, 16), 3};
  ASSERT_TRUE(table.Add(key.get(), 10, Always())->is_new);
  auto again = table.Add(key.get(), 10, Always());
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->is_new);
  EXPECT_EQ(again->refs, 2u);
  EXPECT_EQ(table.size(), 1u);
}

TEST(CompactTableTest, RefusedReservationCreatesNothing) {
  CompactTable<32> table;
  const Key present{Bytes(1, 32), 1};
  const Key refused{Bytes(2, 32), 1};
  ASSERT_TRUE(table.Add(present.get(), 1, Always()).has_value());
  int asked = 0;
  auto never = [&] {
    ++asked;
    return false;
  };
  EXPECT_FALSE(table.Add(refused.get(), 1, never).has_value());
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(table.Contains(refused.get()));
  // A present key is counted without asking.
  auto counted = table.Add(present.get(), 1, never);
  ASSERT_TRUE(counted.has_value());
  EXPECT_EQ(counted->refs, 2u);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(table.size(), 1u);
}

// Distances stored in the slot (up to 254), or computed from the hash
// (from 255 on; here from 0, 1 or 2 on).
class CompactTableDistanceTest : public testing::TestWithParam<uint32_t> {};

INSTANTIATE_TEST_SUITE_P(Far, CompactTableDistanceTest,
                         testing::Values(255u, 2u, 1u, 0u));

TEST_P(CompactTableDistanceTest, RemovalKeepsEveryOtherEntryReachable) {
  CompactTable<32> table(UINT32_MAX, GetParam());
  constexpr int kKeys = 20000;
  std::vector<Key> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back({Bytes(i, 32), 7});
  for (const Key& k : keys) ASSERT_TRUE(table.Add(k.get(), 1, Always()));
  const size_t capacity = table.capacity();
  // Remove two of every three, in an order unrelated to the slots.
  for (int i = 0; i < kKeys; ++i) {
    if (i % 3 == 0) continue;
    const ReleaseResult r = table.Release(keys[i].get());
    ASSERT_TRUE(r.removed) << i;
    ASSERT_EQ(r.refs, 0u);
  }
  EXPECT_EQ(table.size(), static_cast<size_t>((kKeys + 2) / 3));
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(table.Contains(keys[i].get()), i % 3 == 0) << i;
  }
  // Releasing an absent key does nothing.
  const ReleaseResult absent = table.Release(keys[1].get());
  EXPECT_FALSE(absent.removed);
  EXPECT_EQ(absent.refs, 0u);
  // Removed keys come back as new; the table does not shrink.
  for (int i = 0; i < kKeys; ++i) {
    auto added = table.Add(keys[i].get(), 1, Always());
    ASSERT_EQ(added->is_new, i % 3 != 0) << i;
  }
  EXPECT_EQ(table.size(), static_cast<size_t>(kKeys));
  EXPECT_EQ(table.capacity(), capacity);
  // Emptied completely, then refilled.
  for (int i = 0; i < kKeys; ++i) {
    const uint64_t refs = i % 3 == 0 ? 2 : 1;
    for (uint64_t r = refs; r > 0; --r) {
      ASSERT_EQ(table.Release(keys[i].get()).refs, r - 1) << i;
    }
  }
  EXPECT_EQ(table.size(), 0u);
  for (const Key& k : keys) EXPECT_FALSE(table.Contains(k.get()));
}

TEST(CompactTableTest, KeysDifferingInOneByteOrTheNamespaceAreDistinct) {
  CompactTable<32> table;
  const std::string base = Bytes(42, 32);
  std::vector<Key> keys;
  keys.push_back({base, 1});
  keys.push_back({base, 2});
  keys.push_back({base, kMaxNamespaceId});
  for (size_t at = 0; at < base.size(); ++at) {
    for (int flip : {0x01, 0x80}) {
      std::string other = base;
      other[at] = static_cast<char>(other[at] ^ flip);
      keys.push_back({other, 1});
    }
  }
  for (const Key& k : keys) {
    auto added = table.Add(k.get(), 1, Always());
    ASSERT_TRUE(added->is_new);
  }
  EXPECT_EQ(table.size(), keys.size());
  // Removing one leaves all its neighbours.
  ASSERT_TRUE(table.Release(keys[0].get()).removed);
  EXPECT_FALSE(table.Contains(keys[0].get()));
  for (size_t i = 1; i < keys.size(); ++i) {
    EXPECT_TRUE(table.Contains(keys[i].get())) << i;
  }
}

TEST(CompactTableTest, CountsPastTheSlotSpillAndComeBackExactly) {
  // Slots count to 3 here (UINT32_MAX in the index): 4 and up spill.
  CompactTable<32> table(/*ref_low_max=*/3);
  const Key key{Bytes(5, 32), 1};
  const Key neighbour{Bytes(6, 32), 1};
  ASSERT_TRUE(table.Add(neighbour.get(), 1, Always()));
  for (uint64_t n = 1; n <= 11; ++n) {
    auto added = table.Add(key.get(), 1, Always());
    ASSERT_EQ(added->refs, n);
    ASSERT_EQ(added->is_new, n == 1);
    ASSERT_EQ(table.RefCount(key.get()), n);
    ASSERT_EQ(table.spilled(), n > 3 ? 1u : 0u) << n;
  }
  // Moves (growth) keep the spilled count.
  for (int i = 100; i < 200; ++i) {
    ASSERT_TRUE(table.Add(Key{Bytes(i, 32), 1}.get(), 1, Always()));
  }
  EXPECT_EQ(table.RefCount(key.get()), 11u);
  for (uint64_t n = 10; n > 0; --n) {
    const ReleaseResult r = table.Release(key.get());
    ASSERT_EQ(r.refs, n);
    ASSERT_FALSE(r.removed);
    ASSERT_EQ(table.spilled(), n > 3 ? 1u : 0u) << n;
  }
  const ReleaseResult last = table.Release(key.get());
  EXPECT_TRUE(last.removed);
  EXPECT_FALSE(table.Contains(key.get()));
  EXPECT_EQ(table.RefCount(neighbour.get()), 1u);
  // No spilled part is left behind: a new entry starts at 1 and removes at
  // its first release.
  EXPECT_EQ(table.Add(key.get(), 1, Always())->refs, 1u);
  EXPECT_TRUE(table.Release(key.get()).removed);
}

TEST(CompactTableTest, HintsFlagFollowsTheEntry) {
  CompactTable<16> table;
  std::vector<Key> keys;
  for (int i = 0; i < 1000; ++i) keys.push_back({Bytes(i, 16), 2});
  EXPECT_FALSE(table.MarkHints(keys[0].get()));
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(table.Add(keys[i].get(), 1, Always()));
  for (int i = 0; i < 10; i += 2) ASSERT_TRUE(table.MarkHints(keys[i].get()));
  // Growth and removals move entries; the flag moves with them.
  for (int i = 10; i < 1000; ++i) {
    ASSERT_TRUE(table.Add(keys[i].get(), 1, Always()));
  }
  for (int i = 10; i < 1000; i += 2)
    ASSERT_TRUE(table.Release(keys[i].get()).removed);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(table.HasHints(keys[i].get()), i % 2 == 0) << i;
    const ReleaseResult r = table.Release(keys[i].get());
    EXPECT_TRUE(r.removed);
    EXPECT_EQ(r.had_hints, i % 2 == 0) << i;
  }
}

TEST(StringKeyTableTest, AnyLengthIncludingEmpty) {
  StringKeyTable table;
  const std::vector<std::string> fps = {
      "",   std::string("\0", 1), "a",
      "ab", std::string(31, 'x'), std::string(33, 'x')};
  for (const std::string& fp : fps) {
    ASSERT_TRUE(table.Add({1, fp, 0}, 1, Always())->is_new);
    ASSERT_FALSE(table.Contains({2, fp, 0}));
  }
  EXPECT_EQ(table.size(), fps.size());
  EXPECT_EQ(table.Add({1, "a", 0}, 1, Always())->refs, 2u);
  EXPECT_TRUE(table.MarkHints({1, "ab", 0}));
  EXPECT_FALSE(table.MarkHints({2, "ab", 0}));
  const ReleaseResult r = table.Release({1, "ab", 0});
  EXPECT_TRUE(r.removed);
  EXPECT_TRUE(r.had_hints);
  EXPECT_EQ(table.Release({1, "a", 0}).refs, 1u);
  EXPECT_EQ(table.RefCount({1, "a", 0}), 1u);
}

}  // namespace
}  // namespace chunkd::index
