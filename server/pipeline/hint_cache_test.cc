#include "pipeline/hint_cache.h"

#include <string>
#include <vector>

#include "fingerprint/fingerprint.h"
#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

std::string Sha(const std::string& bytes) {
  return fingerprint::Digest(fingerprint::Kind::kSha256, bytes);
}

std::string AsString(const HintCache::Entry& e) {
  return std::string(reinterpret_cast<const char*>(e.sha256.data()),
                     e.sha256.size());
}

std::vector<uint32_t> SizesOf(const HintCache::Entry& e) {
  return std::vector<uint32_t>(e.sizes.begin(), e.sizes.begin() + e.num_sizes);
}

TEST(HintCacheTest, ReturnsWhatWasPutUnderTheSameScopeAndContent) {
  HintCache cache(1000);
  const uint64_t scope = HintCache::Scope("ns", "fastcdc:4096:16384:65536:2:0");
  const HintCache::Key key = HintCache::KeyOf(scope, "chunk bytes");
  EXPECT_FALSE(cache.Get(key).has_value());
  cache.Put(key, Sha("chunk bytes"));
  auto hit = cache.Get(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(AsString(*hit), Sha("chunk bytes"));
  // Other content, namespace or parameters: other keys.
  EXPECT_FALSE(cache.Get(HintCache::KeyOf(scope, "chunk byteS")).has_value());
  EXPECT_FALSE(cache
                   .Get(HintCache::KeyOf(
                       HintCache::Scope("ns2", "fastcdc:4096:16384:65536:2:0"),
                       "chunk bytes"))
                   .has_value());
  EXPECT_FALSE(cache
                   .Get(HintCache::KeyOf(
                       HintCache::Scope("ns", "fastcdc:4096:16384:65536:1:0"),
                       "chunk bytes"))
                   .has_value());
  // A new value replaces the old one without taking another entry.
  cache.Put(key, Sha("other"));
  EXPECT_EQ(AsString(*cache.Get(key)), Sha("other"));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(HintCacheTest, HoldsAtMostItsCapacityAndDropsTheOldestFirst) {
  HintCache cache(160);  // 10 per shard
  const uint64_t scope = HintCache::Scope("ns", "p");
  for (int i = 0; i < 5000; ++i) {
    const std::string bytes = "chunk " + std::to_string(i);
    cache.Put(HintCache::KeyOf(scope, bytes), Sha(bytes));
    ASSERT_LE(cache.size(), cache.capacity());
  }
  EXPECT_EQ(cache.size(), cache.capacity());
  // The newest entries are there; the oldest are gone.
  int newest = 0, oldest = 0;
  for (int i = 0; i < 50; ++i) {
    newest +=
        cache.Get(HintCache::KeyOf(scope, "chunk " + std::to_string(4999 - i)))
            .has_value();
    oldest += cache.Get(HintCache::KeyOf(scope, "chunk " + std::to_string(i)))
                  .has_value();
  }
  EXPECT_GT(newest, 40);
  EXPECT_EQ(oldest, 0);
}

TEST(HintCacheTest, KeepsNextSizesMostRecentFirst) {
  HintCache cache(100);
  const HintCache::Key key = HintCache::KeyOf(1, "x");
  cache.Learn(key, 7);  // not held: nothing
  cache.SetSizes(key, {1, 2});
  EXPECT_FALSE(cache.Get(key).has_value());
  cache.Put(key, Sha("x"));
  EXPECT_TRUE(SizesOf(*cache.Get(key)).empty());
  cache.Learn(key, 10);
  cache.Learn(key, 20);
  cache.Learn(key, 10);
  EXPECT_EQ(SizesOf(*cache.Get(key)), (std::vector<uint32_t>{10, 20}));
  for (uint32_t s : {30u, 40u, 50u}) cache.Learn(key, s);
  EXPECT_EQ(SizesOf(*cache.Get(key)), (std::vector<uint32_t>{50, 40, 30, 10}));
  cache.SetSizes(key, {5, 6, 7, 8, 9, 11});
  EXPECT_EQ(SizesOf(*cache.Get(key)), (std::vector<uint32_t>{5, 6, 7, 8}));
  // The same SHA-256 again keeps them; another drops them.
  cache.Put(key, Sha("x"));
  EXPECT_EQ(SizesOf(*cache.Get(key)).size(), 4u);
  cache.Put(key, Sha("y"));
  EXPECT_TRUE(SizesOf(*cache.Get(key)).empty());
}

TEST(HintCacheTest, ZeroCapacityHoldsNothing) {
  HintCache cache(0);
  const HintCache::Key key = HintCache::KeyOf(1, "x");
  cache.Put(key, Sha("x"));
  EXPECT_FALSE(cache.Get(key).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(HintCacheTest, IgnoresValuesThatAreNotSha256) {
  HintCache cache(16);
  const HintCache::Key key = HintCache::KeyOf(1, "x");
  cache.Put(key, "short");
  EXPECT_FALSE(cache.Get(key).has_value());
}

}  // namespace
}  // namespace chunkd::pipeline
