#include "pipeline/fingerprint_stage.h"

#include <random>
#include <string>
#include <vector>

#include "chunking/executor.h"
#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Chunks of 1 to 8 KiB over `data`.
std::vector<CutChunk> Cuts(const std::string& data) {
  std::vector<CutChunk> cuts;
  std::mt19937 rng(9);
  for (size_t at = 0; at < data.size();) {
    const size_t n = std::min<size_t>(data.size() - at, 1024 + rng() % 7168);
    CutChunk& c = cuts.emplace_back();
    c.offset = at;
    c.bytes = absl::string_view(data).substr(at, n);
    at += n;
  }
  return cuts;
}

// Many groups on an executor: every chunk gets its own digest.
TEST(FingerprintStageTest, FingerprintsEveryChunkInPlaceOnAnExecutor) {
  const std::string data = RandomBytes(4 << 20, 1);
  chunking::ThreadPoolExecutor pool(3);
  for (fingerprint::Kind kind :
       {fingerprint::Kind::kSha256, fingerprint::Kind::kXxh128}) {
    FingerprintStage::Options o;
    o.kind = kind;
    o.executor = &pool;
    FingerprintStage stage(o);
    std::vector<CutChunk> cuts = Cuts(data);
    ASSERT_GT(cuts.size(), 800u);
    stage.FingerprintChunks(absl::MakeSpan(cuts));
    for (const CutChunk& c : cuts) {
      ASSERT_EQ(c.fingerprint, fingerprint::Digest(kind, c.bytes)) << c.offset;
      ASSERT_FALSE(c.keyed);
    }
  }
}

// The hint follower's chunks keep the fingerprint they came with.
TEST(FingerprintStageTest, KeepsTheFingerprintsItIsGiven) {
  const std::string data = RandomBytes(64 << 10, 2);
  FingerprintStage stage({});
  std::vector<CutChunk> cuts = Cuts(data);
  cuts[1].fingerprint = "given";
  stage.FingerprintChunks(absl::MakeSpan(cuts));
  EXPECT_EQ(cuts[1].fingerprint, "given");
  EXPECT_EQ(cuts[0].fingerprint,
            fingerprint::Digest(fingerprint::Kind::kSha256, cuts[0].bytes));
  EXPECT_EQ(cuts[2].fingerprint,
            fingerprint::Digest(fingerprint::Kind::kSha256, cuts[2].bytes));
}

// A cache that takes every chunk gets each one's SHA-256 under its key;
// otherwise FingerprintChunks() leaves the cache alone.
TEST(FingerprintStageTest, CachesEveryChunkOnlyWhenAskedTo) {
  const std::string data = RandomBytes(1 << 20, 3);
  for (bool cache_all : {false, true}) {
    HintCache cache(1 << 12);
    FingerprintStage::Options o;
    o.cache = &cache;
    o.scope = cache.ScopeOf("ns", "params");
    o.cache_all = cache_all;
    FingerprintStage stage(o);
    std::vector<CutChunk> cuts = Cuts(data);
    stage.FingerprintChunks(absl::MakeSpan(cuts));
    if (!cache_all) {
      EXPECT_EQ(cache.size(), 0u);
      for (const CutChunk& c : cuts) EXPECT_FALSE(c.keyed);
      continue;
    }
    EXPECT_EQ(cache.size(), cuts.size());
    for (const CutChunk& c : cuts) {
      ASSERT_TRUE(c.keyed);
      ASSERT_TRUE(c.key == cache.KeyOf(o.scope, c.bytes));
      const auto entry = cache.Get(c.key);
      ASSERT_TRUE(entry.has_value());
      EXPECT_EQ(absl::string_view(
                    reinterpret_cast<const char*>(entry->sha256.data()), 32),
                c.fingerprint);
    }
  }
}

// FingerprintViaCache hashes what the cache does not hold, and caches it;
// the next call is a hit, with the sizes the entry has meanwhile.
TEST(FingerprintStageTest, FingerprintViaCacheHashesOnceThenHits) {
  HintCache cache(64);
  FingerprintStage::Options o;
  o.cache = &cache;
  o.scope = cache.ScopeOf("ns", "params");
  FingerprintStage stage(o);
  ASSERT_TRUE(stage.cached());
  const std::string chunk = RandomBytes(5000, 4);
  const std::string want =
      fingerprint::Digest(fingerprint::Kind::kSha256, chunk);
  const HintCache::Key key = stage.KeyOf(chunk);
  std::string fp;
  EXPECT_FALSE(stage.FingerprintViaCache(key, chunk, &fp).has_value());
  EXPECT_EQ(fp, want);
  cache.SetSizes(key, {4096, 8192});
  fp.clear();
  const auto hit = stage.FingerprintViaCache(key, chunk, &fp);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(fp, want);
  EXPECT_EQ(hit->num_sizes, 2);
  EXPECT_EQ(hit->sizes[0], 4096u);
  EXPECT_EQ(stage.Digest(chunk), want);
}

}  // namespace
}  // namespace chunkd::pipeline
