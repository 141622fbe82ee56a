#include "pipeline/index_stage.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/rapid_cdc.h"
#include "pipeline/recording_index_for_tests.h"

namespace chunkd::pipeline {
namespace {

// Chunks over `data` at the given ends, fingerprinted as their bytes.
std::vector<CutChunk> Cuts(const std::string& data,
                           const std::vector<size_t>& ends) {
  std::vector<CutChunk> cuts;
  size_t at = 0;
  for (size_t end : ends) {
    CutChunk& c = cuts.emplace_back();
    c.offset = at;
    c.bytes = absl::string_view(data).substr(at, end - at);
    c.fingerprint = "fp:" + std::string(c.bytes);
    at = end;
  }
  return cuts;
}

IndexStage::Options Options(index::FingerprintIndex* index) {
  IndexStage::Options o;
  o.index = index;
  o.ns = "ns";
  return o;
}

// A stage that learns hints (under the params key "params").
class HintsTest : public ::testing::Test {
 protected:
  static IndexStage::Options Hinted(index::FingerprintIndex* index) {
    IndexStage::Options o = Options(index);
    o.params_key = "params";
    return o;
  }
  RecordingIndex idx;
  StreamTotals totals;
  IndexStage stage{Hinted(&idx), &totals};
};

TEST(IndexStageTest, CommitSaysWhichChunksAreNew) {
  RecordingIndex idx;
  StreamTotals totals;
  IndexStage stage(Options(&idx), &totals);
  const std::string data = "aaaabbbbbbaaaa";
  std::vector<CutChunk> cuts = Cuts(data, {4, 10, 14});
  stage.Enqueue(absl::MakeSpan(cuts));
  EXPECT_EQ(stage.pending(), 3u);
  EXPECT_TRUE(idx.log.empty()) << "Add waits for Commit";
  std::vector<ChunkRecord> out;
  ASSERT_TRUE(stage.Commit(&out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].is_new);
  EXPECT_TRUE(out[1].is_new);
  EXPECT_FALSE(out[2].is_new);
  EXPECT_EQ(out[1].offset, 4u);
  EXPECT_EQ(out[1].length, 6u);
  EXPECT_EQ(out[1].fingerprint, "fp:bbbbbb");
  EXPECT_EQ(totals.unique_chunks, 2u);
  EXPECT_EQ(totals.unique_bytes, 10u);
  EXPECT_EQ(stage.committed(), 3u);
  EXPECT_FALSE(stage.last_is_new());
  EXPECT_EQ(stage.pending(), 0u);
  EXPECT_EQ(idx.log, std::vector<std::string>({"insert"}));
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log.size(), 1u) << "nothing waits: no call";
}

// Each batch's token starts at the ordinal of its first chunk.
TEST(IndexStageTest, WriteTokensCarryChunkOrdinals) {
  RecordingIndex idx;
  StreamTotals totals;
  IndexStage::Options o = Options(&idx);
  o.stream_id = "stream-1";
  IndexStage stage(o, &totals);
  const std::string data = "abcdefghij";
  std::vector<CutChunk> first = Cuts(data, {1, 2, 3});
  std::vector<CutChunk> second = Cuts(data, {5, 10});
  std::vector<ChunkRecord> out;
  stage.Enqueue(absl::MakeSpan(first));
  ASSERT_TRUE(stage.Commit(&out).ok());
  stage.Enqueue(absl::MakeSpan(second));
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log, std::vector<std::string>({"stream-1@0", "stream-1@3"}));
}

// With hints, each learnable chunk teaches the size that followed the chunk
// before it; every chunk after it goes on its run. A hint is recorded after
// the Insert of the batch that completes its run, or at the stream's end;
// NextHints reads it back.
TEST_F(HintsTest, LearnsHintsAndRecordsThemAfterTheInsert) {
  const std::string data = "AAAABBBBBBCCC";
  std::vector<CutChunk> cuts = Cuts(data, {4, 10, 13});
  cuts[2].learnable = false;  // e.g. cut by the stream's end
  stage.Enqueue(absl::MakeSpan(cuts));
  EXPECT_EQ(stage.last_fingerprint(), "fp:CCC");
  auto before = stage.NextHints("fp:AAAA", nullptr);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->sizes.empty()) << "not recorded before the commit";
  std::vector<ChunkRecord> out;
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log, std::vector<std::string>({"insert"}))
      << "the run is not complete";
  stage.EndOfStream();
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log, std::vector<std::string>({"insert", "record:1"}));
  EXPECT_EQ(out.size(), 3u);
  auto a = stage.NextHints("fp:AAAA", nullptr);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->sizes, std::vector<uint32_t>({EncodeHint(6, 'B')}));
  EXPECT_EQ(a->run, std::vector<uint32_t>({EncodeHint(3, 'C')}))
      << "a chunk that teaches nothing still goes on the run";
  auto b = stage.NextHints("fp:BBBBBB", nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->sizes.empty());
}

// A hint is recorded as soon as its run has kHintRunLength sizes, with the
// batch that completes it; the later ones wait.
TEST_F(HintsTest, RecordsAHintOnceItsRunIsComplete) {
  const std::string data = "AABBBCCCCDDDDDEEEEEEF";
  std::vector<CutChunk> cuts = Cuts(data, {2, 5, 9, 14, 20, 21});
  std::vector<ChunkRecord> out;
  stage.Enqueue(absl::MakeSpan(cuts).subspan(0, 4));  // A B C D
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log, std::vector<std::string>({"insert"}));
  stage.Enqueue(absl::MakeSpan(cuts).subspan(4, 1));  // E completes A's run
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_EQ(idx.log,
            std::vector<std::string>({"insert", "insert", "record:1"}));
  auto a = stage.NextHints("fp:AA", nullptr);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->sizes, std::vector<uint32_t>({EncodeHint(3, 'B')}));
  EXPECT_EQ(a->run, std::vector<uint32_t>({EncodeHint(4, 'C'),
                                           EncodeHint(5, 'D'),
                                           EncodeHint(6, 'E')}));
  auto b = stage.NextHints("fp:BBB", nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->sizes.empty()) << "its run is not complete yet";
  stage.Enqueue(absl::MakeSpan(cuts).subspan(5));  // F
  stage.EndOfStream();
  ASSERT_TRUE(stage.Commit(&out).ok());
  // B's run completed with F; C, D and E are recorded by the end of the
  // stream (E with a run of F only).
  EXPECT_EQ(idx.log.back(), "record:4");
  auto e = stage.NextHints("fp:EEEEEE", nullptr);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->sizes, std::vector<uint32_t>({EncodeHint(1, 'F')}));
  EXPECT_TRUE(e->run.empty());
  auto d = stage.NextHints("fp:DDDDD", nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->run, std::vector<uint32_t>({EncodeHint(1, 'F')}));
}

// A failed stream records nothing it learned.
TEST_F(HintsTest, DiscardDropsTheHintsWaitingForTheirRuns) {
  const std::string data = "AABBBCCCC";
  std::vector<CutChunk> cuts = Cuts(data, {2, 5, 9});
  stage.Enqueue(absl::MakeSpan(cuts));
  stage.Discard();
  stage.EndOfStream();
  std::vector<ChunkRecord> out;
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_TRUE(idx.log.empty());
  EXPECT_TRUE(out.empty());
}

// A failed Insert drops the batch and what it taught.
TEST_F(HintsTest, FailedInsertDropsTheBatch) {
  const std::string data = "AAAABBBB";
  std::vector<CutChunk> cuts = Cuts(data, {4, 8});
  stage.Enqueue(absl::MakeSpan(cuts));
  idx.fail = true;
  std::vector<ChunkRecord> out;
  EXPECT_EQ(stage.Commit(&out).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(stage.pending(), 0u);
  idx.fail = false;
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_TRUE(idx.log.empty());
  EXPECT_EQ(stage.committed(), 0u);
}

TEST(IndexStageTest, DiscardDropsWhatWaits) {
  RecordingIndex idx;
  StreamTotals totals;
  IndexStage stage(Options(&idx), &totals);
  const std::string data = "AAAABBBB";
  std::vector<CutChunk> cuts = Cuts(data, {4, 8});
  stage.Enqueue(absl::MakeSpan(cuts));
  stage.Discard();
  EXPECT_EQ(stage.pending(), 0u);
  std::vector<ChunkRecord> out;
  ASSERT_TRUE(stage.Commit(&out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(idx.log.empty());
}

// With a hint cache: duplicates among the chunks without a key are cached
// once the batch is in; the cache learns what followed keyed chunks, and
// takes the sizes NextHints reads for a key.
TEST(IndexStageTest, TeachesTheHintCache) {
  RecordingIndex idx;
  StreamTotals totals;
  HintCache cache(64);
  IndexStage::Options o = Options(&idx);
  o.params_key = "params";
  o.cache = &cache;
  o.scope = cache.ScopeOf("ns", "params");
  IndexStage stage(o, &totals);
  const std::string sha_a(32, 'a');
  const std::string data = "AAAABBBBBB";
  std::vector<ChunkRecord> out;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<CutChunk> cuts = Cuts(data, {4, 10});
    cuts[0].fingerprint = sha_a;
    stage.Enqueue(absl::MakeSpan(cuts));
    ASSERT_TRUE(stage.Commit(&out).ok());
    // New the first time: not cached; a duplicate the second: cached.
    const auto entry = cache.Get(cache.KeyOf(o.scope, "AAAA"));
    EXPECT_EQ(entry.has_value(), pass == 1) << pass;
  }

  // Keyed chunks: the cache learns the size that followed.
  const HintCache::Key key_a = cache.KeyOf(o.scope, "AAAA");
  std::vector<CutChunk> keyed = Cuts(data, {4, 10});
  keyed[0].fingerprint = sha_a;
  for (CutChunk& c : keyed) {
    c.keyed = true;
    c.key = cache.KeyOf(o.scope, c.bytes);
  }
  stage.Enqueue(absl::MakeSpan(keyed));
  const auto learned = cache.Get(key_a);
  ASSERT_TRUE(learned.has_value());
  ASSERT_EQ(learned->num_sizes, 1);
  EXPECT_EQ(learned->sizes[0], EncodeHint(6, 'B'));
  stage.EndOfStream();
  ASSERT_TRUE(stage.Commit(&out).ok());

  // What the index answers for a key lands in its entry.
  cache.SetSizes(key_a, {});
  auto hints = stage.NextHints(sha_a, &key_a);
  ASSERT_TRUE(hints.ok());
  ASSERT_FALSE(hints->sizes.empty());
  const auto read = cache.Get(key_a);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->num_sizes, hints->sizes.size());
}

}  // namespace
}  // namespace chunkd::pipeline
