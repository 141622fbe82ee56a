#include "pipeline/hint_cache.h"

#include <array>
#include <memory>
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
  const HintCache::Scope scope =
      cache.ScopeOf("ns", "fastcdc:4096:16384:65536:2:0");
  const HintCache::Key key = cache.KeyOf(scope, "chunk bytes");
  EXPECT_FALSE(cache.Get(key).has_value());
  cache.Put(key, Sha("chunk bytes"));
  auto hit = cache.Get(key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(AsString(*hit), Sha("chunk bytes"));
  // Other content, namespace or parameters: other keys.
  EXPECT_FALSE(cache.Get(cache.KeyOf(scope, "chunk byteS")).has_value());
  EXPECT_FALSE(cache
                   .Get(cache.KeyOf(
                       cache.ScopeOf("ns2", "fastcdc:4096:16384:65536:2:0"),
                       "chunk bytes"))
                   .has_value());
  EXPECT_FALSE(cache
                   .Get(cache.KeyOf(
                       cache.ScopeOf("ns", "fastcdc:4096:16384:65536:1:0"),
                       "chunk bytes"))
                   .has_value());
  // A new value replaces the old one without taking another entry.
  cache.Put(key, Sha("other"));
  EXPECT_EQ(AsString(*cache.Get(key)), Sha("other"));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(HintCacheTest, ScopesDoNotRunTogether) {
  HintCache cache(100);
  // The namespace's length is part of the scope: "a" + "bc" is not "ab" + "c".
  EXPECT_NE(cache.ScopeOf("a", "bc"), cache.ScopeOf("ab", "c"));
  EXPECT_EQ(cache.ScopeOf("a", "bc"), cache.ScopeOf("a", "bc"));
}

TEST(HintCacheTest, KeysDependOnTheSecretKey) {
  // Two servers (random keys) key the same content differently, and one
  // given key always the same way: nobody who lacks the key can tell which
  // contents share a key.
  const std::string bytes(20000, 'z');
  HintCache a(10), b(10);
  EXPECT_NE(a.KeyOf(a.ScopeOf("ns", "p"), bytes).content,
            b.KeyOf(b.ScopeOf("ns", "p"), bytes).content);
  const std::array<uint8_t, 16> fixed = {1, 2, 3, 4, 5, 6, 7, 8,
                                         9, 10, 11, 12, 13, 14, 15, 16};
  HintCache c(10, std::make_unique<fingerprint::ContentKeyer>(fixed));
  HintCache d(10, std::make_unique<fingerprint::ContentKeyer>(fixed));
  EXPECT_EQ(c.KeyOf(c.ScopeOf("ns", "p"), bytes),
            d.KeyOf(d.ScopeOf("ns", "p"), bytes));
  // Every byte counts, and so does the length (zeros added at the end).
  EXPECT_NE(c.KeyOf(c.ScopeOf("ns", "p"), bytes).content,
            c.KeyOf(c.ScopeOf("ns", "p"), bytes + std::string(1, '\0')).content);
  std::string flipped = bytes;
  flipped[12345] ^= 1;
  EXPECT_NE(c.KeyOf(c.ScopeOf("ns", "p"), bytes).content,
            c.KeyOf(c.ScopeOf("ns", "p"), flipped).content);
}

TEST(HintCacheTest, HoldsAtMostItsCapacityAndDropsTheOldestFirst) {
  HintCache cache(160);  // 10 per shard
  const HintCache::Scope scope = cache.ScopeOf("ns", "p");
  for (int i = 0; i < 5000; ++i) {
    const std::string bytes = "chunk " + std::to_string(i);
    cache.Put(cache.KeyOf(scope, bytes), Sha(bytes));
    ASSERT_LE(cache.size(), cache.capacity());
  }
  EXPECT_EQ(cache.size(), cache.capacity());
  // The newest entries are there; the oldest are gone.
  int newest = 0, oldest = 0;
  for (int i = 0; i < 50; ++i) {
    newest +=
        cache.Get(cache.KeyOf(scope, "chunk " + std::to_string(4999 - i)))
            .has_value();
    oldest += cache.Get(cache.KeyOf(scope, "chunk " + std::to_string(i)))
                  .has_value();
  }
  EXPECT_GT(newest, 40);
  EXPECT_EQ(oldest, 0);
}

TEST(HintCacheTest, KeepsNextSizesMostRecentFirst) {
  HintCache cache(100);
  const HintCache::Key key = cache.KeyOf(cache.ScopeOf("ns", "p"), "x");
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
  const HintCache::Key key = cache.KeyOf(cache.ScopeOf("ns", "p"), "x");
  cache.Put(key, Sha("x"));
  EXPECT_FALSE(cache.Get(key).has_value());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(HintCacheTest, IgnoresValuesThatAreNotSha256) {
  HintCache cache(16);
  const HintCache::Key key = cache.KeyOf(cache.ScopeOf("ns", "p"), "x");
  cache.Put(key, "short");
  EXPECT_FALSE(cache.Get(key).has_value());
}

}  // namespace
}  // namespace chunkd::pipeline
