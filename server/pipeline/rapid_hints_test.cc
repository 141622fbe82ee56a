// Dedup with RapidCDC hints against Dedup without, on versioned data with
// inserts, deletes and overwrites (docs/design.md, "Why FF+RWT+FPT is exact"): with FF+RWT+FPT the records
// are identical, whatever the message split or executor; FF and FF+MT still
// cover every byte with correct fingerprints, and the test reports how many
// boundaries they moved. Runs on the memory index, and on a real
// redis-server when CHUNKD_WITH_REDIS is set and redis-server is installed.
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chunking/executor.h"
#include "gtest/gtest.h"
#include "index/fingerprint_index.h"
#include "pipeline/stream_pipeline.h"
#include "workload/datagen.h"
#ifdef CHUNKD_WITH_REDIS
#include "support/redis_process.h"
#endif

namespace chunkd::pipeline {
namespace {

struct Stream {
  std::vector<ChunkRecord> records;
  StreamTotals totals;
};

chunking::ChunkerOptions Params() {
  chunking::ChunkerOptions o = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  o.min_size = 2048;
  o.avg_size = 8192;
  o.max_size = 32768;
  o.normalization_level = 2;
  return o;
}

// One Dedup stream of `data` in pieces of `piece` bytes (0: random sizes).
Stream Dedup(index::FingerprintIndex* idx, const std::string& ns,
             HintTest hints, const std::vector<uint8_t>& data, size_t piece,
             chunking::Executor* executor = nullptr, HintCache* cache = nullptr,
             bool cache_all = false, size_t window = 256 << 10) {
  PipelineOptions o;
  o.chunking = Params();
  o.index = idx;
  o.ns = ns;
  o.hints = hints;
  o.engine.executor = executor;
  o.hint_cache = cache;
  o.hint_cache_all_chunks = cache_all;
  // The chunker hands over to the hints between windows: a small one lets
  // them take over early in these 3 MiB streams.
  o.engine.window_size = window;
  auto p = StreamPipeline::Create(o);
  EXPECT_TRUE(p.ok()) << p.status();
  Stream s;
  std::mt19937 rng(static_cast<uint32_t>(data.size() + piece));
  const absl::string_view all(reinterpret_cast<const char*>(data.data()),
                              data.size());
  for (size_t at = 0; at < all.size();) {
    const size_t n = piece != 0 ? piece : 1 + rng() % 200000;
    absl::Status st = (*p)->Process(all.substr(at, n), &s.records);
    EXPECT_TRUE(st.ok()) << st;
    at += n;
  }
  absl::Status st = (*p)->Finish(&s.records);
  EXPECT_TRUE(st.ok()) << st;
  s.totals = (*p)->totals();
  return s;
}

workload::VersionedDataset Versions() {
  workload::VersionedOptions v;
  v.base_size = size_t{3} << 20;
  v.versions = 4;
  v.modifications = 30;
  v.seed = 42;
  return workload::GenerateVersioned(v);
}

class RapidHintsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      auto idx = index::CreateIndex("memory");
      ASSERT_TRUE(idx.ok());
      with_hints_ = *std::move(idx);
      idx = index::CreateIndex("memory");
      without_ = *std::move(idx);
      return;
    }
#ifdef CHUNKD_WITH_REDIS
    absl::Status tools = index::testing::RedisToolsAvailable();
    if (!tools.ok()) GTEST_SKIP() << tools.message();
    auto server = index::testing::RedisProcess::Start({});
    ASSERT_TRUE(server.ok()) << server.status();
    redis_ = *std::move(server);
    auto idx = index::CreateIndex("redis://" + redis_->address());
    ASSERT_TRUE(idx.ok()) << idx.status();
    with_hints_ = *std::move(idx);
    idx = index::CreateIndex("redis://" + redis_->address() + "/1");
    ASSERT_TRUE(idx.ok()) << idx.status();
    without_ = *std::move(idx);
#else
    GTEST_SKIP() << "built without CHUNKD_WITH_REDIS";
#endif
  }

#ifdef CHUNKD_WITH_REDIS
  std::unique_ptr<index::testing::RedisProcess> redis_;
#endif
  // Like chunkd: the cache takes every chunk with a Redis index, only the
  // duplicates with the memory index; both paths are tested.
  bool CacheAll() const { return GetParam() == "redis"; }
  std::unique_ptr<index::FingerprintIndex> with_hints_;
  std::unique_ptr<index::FingerprintIndex> without_;
};

void ExpectSameRecords(const Stream& hinted, const Stream& plain,
                       const std::string& what) {
  ASSERT_EQ(hinted.records.size(), plain.records.size()) << what;
  for (size_t i = 0; i < plain.records.size(); ++i) {
    const ChunkRecord& a = hinted.records[i];
    const ChunkRecord& b = plain.records[i];
    ASSERT_EQ(a.offset, b.offset) << what << " record " << i;
    ASSERT_EQ(a.length, b.length) << what << " record " << i;
    ASSERT_EQ(a.fingerprint, b.fingerprint) << what << " record " << i;
    ASSERT_EQ(a.is_new, b.is_new) << what << " record " << i;
  }
  EXPECT_EQ(hinted.totals.unique_bytes, plain.totals.unique_bytes) << what;
  EXPECT_EQ(hinted.totals.chunks, plain.totals.chunks) << what;
}

// Every version after the base is mostly duplicate: hints carry most of it,
// and the records equal those of plain Dedup, for several message splits;
// from the third version on the hint cache gives most fingerprints.
TEST_P(RapidHintsTest, FfRwtFptIsExactOnVersionedData) {
  const workload::VersionedDataset data = Versions();
  chunking::ThreadPoolExecutor pool(2);
  HintCache cache(1 << 16);
  const size_t pieces[] = {1 << 20, 4093, 0, 65536, 0};
  for (size_t v = 0; v < data.versions.size(); ++v) {
    const std::string what = absl::StrCat("version ", v);
    const Stream hinted =
        Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[v],
              pieces[v], v % 2 ? &pool : nullptr, &cache, CacheAll());
    const Stream plain =
        Dedup(without_.get(), "ns", HintTest::kOff, data.versions[v], 1 << 20);
    ExpectSameRecords(hinted, plain, what);
    EXPECT_EQ(hinted.totals.hints_accepted + hinted.totals.hints_rejected,
              hinted.totals.hints_tried);
    if (v == 0) {
      EXPECT_EQ(hinted.totals.hints_accepted, 0u);
    } else {
      // 30 edits of ~100 bytes in 3 MiB: most of it is skipped (the chunker
      // cuts the first window before hints can take over).
      EXPECT_GT(hinted.totals.hint_skipped_bytes, data.versions[v].size() * 6 / 10)
          << what;
    }
    if (v >= 2) {
      EXPECT_GT(hinted.totals.cache_hits, hinted.totals.hints_accepted / 2)
          << what;
    }
  }
  // The whole dataset again, as one stream: all duplicate, nearly all hinted.
  const std::vector<uint8_t> all = data.Concatenated();
  const Stream hinted = Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, all,
                              0, &pool, &cache, CacheAll());
  const Stream plain = Dedup(without_.get(), "ns", HintTest::kOff, all, 0);
  ExpectSameRecords(hinted, plain, "concatenated");
  EXPECT_GT(hinted.totals.cache_hits, hinted.totals.hints_accepted / 2);
  // Only chunks that span two versions are new.
  EXPECT_LT(hinted.totals.unique_bytes, all.size() / 100);
  EXPECT_GT(hinted.totals.hint_skipped_bytes, all.size() * 9 / 10);
}

// Data with few duplicates: a chunk the chunker cut is now and then a
// duplicate, but its hints lead nowhere (an edit in the next chunk), so the
// chunker that found it goes on where it stopped. A 64 KiB window makes the
// chunker look at its last chunk every 64 KiB, so that this happens often,
// within a message and across messages. The records are still those of
// plain Dedup, however the messages split the stream; and unique data never
// tries a hint.
// Without a hint cache the chain hashes what it follows: runs of hinted
// chunks hashed together, exact all the same.
TEST_P(RapidHintsTest, FfRwtFptFollowsRunsExactlyWithoutACache) {
  const workload::VersionedDataset data = Versions();
  chunking::ThreadPoolExecutor pool(2);
  const size_t pieces[] = {1 << 20, 4093, 0, 65536, 0};
  for (size_t v = 0; v < data.versions.size(); ++v) {
    const std::string what = absl::StrCat("version ", v);
    const Stream hinted =
        Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[v],
              pieces[v], v % 2 ? &pool : nullptr);
    const Stream plain =
        Dedup(without_.get(), "ns", HintTest::kOff, data.versions[v], 1 << 20);
    ExpectSameRecords(hinted, plain, what);
    EXPECT_EQ(hinted.totals.hints_accepted + hinted.totals.hints_rejected,
              hinted.totals.hints_tried);
    EXPECT_EQ(hinted.totals.cache_hits + hinted.totals.cache_misses, 0u);
    if (v > 0) {
      EXPECT_GT(hinted.totals.hint_skipped_bytes,
                data.versions[v].size() * 6 / 10)
          << what;
      // Most hinted chunks come in runs of several, unless the messages
      // are shorter than a run (then each chunk is taken as its bytes come).
      if (pieces[v] == 0 || pieces[v] >= 65536) {
        EXPECT_GT(hinted.totals.hints_in_runs,
                  hinted.totals.hints_accepted * 3 / 4)
            << what;
      } else {
        EXPECT_LT(hinted.totals.hints_in_runs, hinted.totals.hints_accepted)
            << what;
      }
    }
  }
}

TEST_P(RapidHintsTest, FfRwtFptIsExactWhenHintsKeepFailing) {
  workload::VersionedOptions v;
  v.base_size = size_t{3} << 20;
  v.versions = 5;
  // One edit per 4 KiB: about one chunk in seven is a duplicate, and most
  // duplicates are followed by an edited chunk.
  v.modifications = v.base_size / 4096;
  v.seed = 43;
  const workload::VersionedDataset data = workload::GenerateVersioned(v);
  chunking::ThreadPoolExecutor pool(2);
  HintCache cache(1 << 16);
  const size_t pieces[] = {0, 1 << 20, 4093, 65536, 1 << 20, 0};
  uint64_t rejected = 0;
  for (size_t i = 0; i < data.versions.size(); ++i) {
    const std::string what = absl::StrCat("version ", i);
    const Stream hinted =
        Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[i],
              pieces[i], i % 2 ? &pool : nullptr, &cache, CacheAll(),
              /*window=*/64 << 10);
    const Stream plain =
        Dedup(without_.get(), "ns", HintTest::kOff, data.versions[i], 1 << 20);
    ExpectSameRecords(hinted, plain, what);
    rejected += hinted.totals.hints_rejected;
  }
  // The data did what the test is about: hints were tried and failed.
  EXPECT_GT(rejected, 20u);

  const std::vector<uint8_t> unique =
      workload::RandomBytes(size_t{2} << 20, 44);
  bool first = true;
  for (size_t piece : {size_t{1} << 20, size_t{0}, size_t{4093}}) {
    const std::string what = absl::StrCat("unique, pieces of ", piece);
    const Stream hinted = Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT,
                                unique, piece, &pool, &cache, CacheAll());
    const Stream plain =
        Dedup(without_.get(), "ns", HintTest::kOff, unique, 1 << 20);
    ExpectSameRecords(hinted, plain, what);
    if (first) {
      // The first time every chunk is new; after that every chunk is a
      // duplicate, and hints carry them.
      EXPECT_EQ(hinted.totals.hints_tried, 0u) << what;
      EXPECT_EQ(hinted.totals.unique_bytes, unique.size()) << what;
    } else {
      EXPECT_EQ(hinted.totals.unique_bytes, 0u) << what;
      EXPECT_GT(hinted.totals.hint_skipped_bytes, unique.size() / 2) << what;
    }
    first = false;
  }
}

// The cache is scoped by namespace: the same data in another namespace
// gets no fingerprint from it (no tenant learns what another stored), and
// its records are still exact.
TEST_P(RapidHintsTest, CacheIsNotSharedBetweenNamespaces) {
  const workload::VersionedDataset data = Versions();
  chunking::ThreadPoolExecutor pool(2);
  HintCache cache(1 << 16);
  for (size_t v = 0; v < 3; ++v) {
    Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[v],
          1 << 20, &pool, &cache, CacheAll());
  }
  ASSERT_GT(cache.size(), 0u);
  // "other" indexes the base without the cache, so its hints exist but the
  // cache holds its contents only under "ns". The same steps in "control"
  // with a cache of its own: what "other" gets from the shared cache is
  // exactly what its own stream put there (a run of hinted chunks is
  // hashed and cached together, and may meet its chunks again).
  auto second_version = [&](const std::string& ns, HintCache* with) {
    Dedup(with_hints_.get(), ns, HintTest::kFFRWTFPT, data.versions[0],
          1 << 20);
    Dedup(without_.get(), ns, HintTest::kOff, data.versions[0], 1 << 20);
    return Dedup(with_hints_.get(), ns, HintTest::kFFRWTFPT, data.versions[1],
                 65536, &pool, with, CacheAll());
  };
  HintCache own(1 << 16);
  const Stream control = second_version("control", &own);
  const Stream other = second_version("other", &cache);
  const Stream plain =
      Dedup(without_.get(), "other", HintTest::kOff, data.versions[1], 1 << 20);
  ExpectSameRecords(other, plain, "other");
  EXPECT_GT(other.totals.hints_accepted, 10u);
  EXPECT_EQ(other.totals.cache_hits, control.totals.cache_hits);
  EXPECT_LT(other.totals.cache_hits, 10u);
  EXPECT_EQ(other.totals.cache_misses, control.totals.cache_misses);
  EXPECT_GT(other.totals.cache_misses, 10u);
  // The same contents again in "ns": hits, from the entries of "ns".
  const Stream again =
      Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[2],
            1 << 20, &pool, &cache, CacheAll());
  EXPECT_GT(again.totals.cache_hits, again.totals.hints_accepted / 2);
}

// Hints are keyed by the chunking parameters: a stream with other parameters
// in the same namespace never uses them, and stays exact.
TEST_P(RapidHintsTest, HintsOfOtherParametersAreNotUsed) {
  const workload::VersionedDataset data = Versions();
  Dedup(with_hints_.get(), "ns", HintTest::kFFRWTFPT, data.versions[0], 1 << 20);
  PipelineOptions o;
  o.chunking = Params();
  o.chunking.seed = 7;
  o.index = with_hints_.get();
  o.ns = "ns";
  o.hints = HintTest::kFFRWTFPT;
  auto p = StreamPipeline::Create(o);
  ASSERT_TRUE(p.ok());
  std::vector<ChunkRecord> out;
  const absl::string_view bytes(reinterpret_cast<const char*>(data.versions[0].data()),
                                data.versions[0].size());
  ASSERT_TRUE((*p)->Process(bytes, &out).ok());
  ASSERT_TRUE((*p)->Finish(&out).ok());
  EXPECT_EQ((*p)->totals().hints_tried, 0u);
  const auto reference = chunking::ReferenceChunks(o.chunking, data.versions[0]);
  ASSERT_EQ(out.size(), reference.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].offset, reference[i].offset);
}

// The inexact tests still produce a valid chunking of every byte with true
// fingerprints; how far their boundaries move is reported.
TEST_P(RapidHintsTest, InexactTestsCoverEveryByte) {
  const workload::VersionedDataset data = Versions();
  for (HintTest test : {HintTest::kFF, HintTest::kFFMT, HintTest::kFFRWT}) {
    auto idx = index::CreateIndex("memory");
    ASSERT_TRUE(idx.ok());
    size_t differing = 0;
    for (size_t v = 0; v < data.versions.size(); ++v) {
      const Stream hinted = Dedup(idx->get(), "ns", test, data.versions[v], 1 << 20);
      const auto reference = chunking::ReferenceChunks(Params(), data.versions[v]);
      uint64_t offset = 0;
      std::set<uint64_t> reference_ends;
      for (const auto& c : reference) reference_ends.insert(c.offset + c.length);
      for (const ChunkRecord& r : hinted.records) {
        ASSERT_EQ(r.offset, offset);
        ASSERT_GT(r.length, 0u);
        const absl::string_view bytes(
            reinterpret_cast<const char*>(data.versions[v].data()) + r.offset, r.length);
        ASSERT_EQ(r.fingerprint, fingerprint::Digest(fingerprint::Kind::kSha256, bytes));
        offset += r.length;
        differing += reference_ends.count(offset) == 0;
      }
      ASSERT_EQ(offset, data.versions[v].size());
      if (v > 0) {
        EXPECT_GT(hinted.totals.hints_accepted, 0u);
      }
    }
    RecordProperty(std::string(HintTestName(test)) + "_boundaries_not_in_reference",
                   static_cast<int>(differing));
    std::printf("%s: %zu boundaries differ from normal chunking\n",
                std::string(HintTestName(test)).c_str(), differing);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RapidHintsTest,
                         ::testing::Values("memory", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace chunkd::pipeline
