#include "pipeline/hint_cache.h"

#include <string>

#include "fingerprint/fingerprint.h"
#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

std::string Sha(const std::string& bytes) {
  return fingerprint::Digest(fingerprint::Kind::kSha256, bytes);
}

std::string AsString(const HintCache::Sha256& sha) {
  return std::string(reinterpret_cast<const char*>(sha.data()), sha.size());
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
