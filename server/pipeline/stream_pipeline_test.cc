#include "pipeline/stream_pipeline.h"

#include <random>

#include "chunking/executor.h"
#include "gtest/gtest.h"
#include "index/memory_index.h"
#include "metrics/metrics.h"
#include "pipeline/recording_index_for_tests.h"

namespace chunkd::pipeline {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::vector<ChunkRecord> RunStream(PipelineOptions options,
                                   const std::string& data, size_t piece,
                                   StreamTotals* totals = nullptr) {
  auto p = StreamPipeline::Create(std::move(options));
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<ChunkRecord> out;
  for (size_t at = 0; at < data.size(); at += piece) {
    EXPECT_TRUE((*p)->Process(absl::string_view(data).substr(at, piece), &out).ok());
  }
  EXPECT_TRUE((*p)->Finish(&out).ok());
  if (totals != nullptr) *totals = (*p)->totals();
  return out;
}

TEST(StreamPipelineTest, ChunkRecordsMatchReferenceAndDigests) {
  const std::string data = RandomBytes(1 << 20, 1);
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  auto ref = chunking::ReferenceChunks(
      opt.chunking, absl::MakeConstSpan(
                        reinterpret_cast<const uint8_t*>(data.data()), data.size()));
  auto got = RunStream(opt, data, 100000);
  ASSERT_EQ(got.size(), ref.size());
  ASSERT_GT(ref.size(), 10u);
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_EQ(got[i].offset, ref[i].offset);
    EXPECT_EQ(got[i].length, ref[i].length);
    EXPECT_EQ(got[i].fingerprint,
              fingerprint::Digest(fingerprint::Kind::kSha256,
                                  absl::string_view(data).substr(
                                      ref[i].offset, ref[i].length)));
  }
}

// Fingerprinting spread over an executor keeps every record in its place.
TEST(StreamPipelineTest, ParallelFingerprintsKeepOrder) {
  const std::string data = RandomBytes(6 << 20, 3);
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.chunking.min_size = 256;
  opt.chunking.avg_size = 1024;
  opt.chunking.max_size = 4096;
  const auto sequential = RunStream(opt, data, 3 << 20);
  chunking::ThreadPoolExecutor pool(3);
  opt.engine.executor = &pool;
  for (size_t piece : {size_t{3} << 20, size_t{1} << 20, size_t{4093}}) {
    const auto parallel = RunStream(opt, data, piece);
    ASSERT_EQ(parallel.size(), sequential.size()) << piece;
    for (size_t i = 0; i < parallel.size(); ++i) {
      ASSERT_EQ(parallel[i].offset, sequential[i].offset) << i;
      ASSERT_EQ(parallel[i].fingerprint, sequential[i].fingerprint) << i;
    }
  }
  ASSERT_GT(sequential.size(), 3000u);
}

TEST(StreamPipelineTest, SecondDedupIsAllDuplicate) {
  index::MemoryIndex idx;
  const std::string data = RandomBytes(3 << 20, 2);
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.index = &idx;
  opt.ns = "t";
  StreamTotals first, second;
  auto a = RunStream(opt, data, 1 << 20, &first);
  auto b = RunStream(opt, data, 77777, &second);
  EXPECT_EQ(first.bytes, data.size());
  EXPECT_EQ(first.unique_bytes, data.size());
  EXPECT_EQ(first.unique_chunks, a.size());
  EXPECT_EQ(second.unique_bytes, 0u);
  EXPECT_EQ(second.chunks, b.size());
  for (const auto& r : b) EXPECT_FALSE(r.is_new);

  opt.ns = "other";
  StreamTotals third;
  RunStream(opt, data, 1 << 20, &third);
  EXPECT_EQ(third.unique_bytes, data.size());
}

TEST(StreamPipelineTest, StageTimeGoesToItsCounters) {
  metrics::Metrics m("0.0.0", "scalar");
  index::MemoryIndex idx;
  const std::string data = RandomBytes(2 << 20, 3);
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.stages = &m.stages();
  RunStream(opt, data, 1 << 20);
  const double chunk = m.stages().chunk->Value();
  const double fingerprint = m.stages().fingerprint->Value();
  EXPECT_GT(chunk, 0);
  EXPECT_GT(fingerprint, 0);
  EXPECT_EQ(m.stages().index->Value(), 0) << "Chunk has no index stage";

  opt.index = &idx;
  opt.ns = "t";
  RunStream(opt, data, 1 << 20);
  EXPECT_GT(m.stages().chunk->Value(), chunk);
  EXPECT_GT(m.stages().fingerprint->Value(), fingerprint);
  EXPECT_GT(m.stages().index->Value(), 0);
}

TEST(StreamPipelineTest, RetriedStreamWithStreamIdCountsOnceAndAnswersAlike) {
  // Half of the data occurs twice, so the first run has duplicates too.
  const std::string half = RandomBytes(2 << 20, 3);
  const std::string data = half + RandomBytes(1 << 20, 4) + half;
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.ns = "t";

  // What one successful run answers.
  index::MemoryIndex clean;
  opt.index = &clean;
  const std::vector<ChunkRecord> want = RunStream(opt, data, 1 << 20);

  // The first attempt dies on its third batch, which was applied.
  RecordingIndex idx;
  idx.lose_reply_of = 3;
  opt.index = &idx;
  opt.stream_id = "backup-1.file-7";
  {
    auto p = StreamPipeline::Create(opt);
    ASSERT_TRUE(p.ok());
    std::vector<ChunkRecord> out;
    absl::Status status;
    for (size_t at = 0; at < data.size() && status.ok(); at += 1 << 20) {
      status = (*p)->Process(absl::string_view(data).substr(at, 1 << 20), &out);
      if (status.ok()) status = (*p)->NoInputWaiting(&out);
    }
    if (status.ok()) status = (*p)->Finish(&out);
    ASSERT_EQ(status.code(), absl::StatusCode::kUnavailable);
  }
  // The retry, split differently, answers as the clean run did.
  StreamTotals totals;
  const std::vector<ChunkRecord> got = RunStream(opt, data, 300001, &totals);
  ASSERT_EQ(got.size(), want.size());
  uint64_t unique = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].fingerprint, want[i].fingerprint) << i;
    EXPECT_EQ(got[i].is_new, want[i].is_new) << i;
    unique += want[i].is_new;
  }
  EXPECT_EQ(totals.unique_chunks, unique);
  EXPECT_LT(unique, want.size());
  // Every reference was counted exactly as often as the clean run did: one
  // more reference (without token) gives the same counts in both.
  std::vector<index::InsertEntry> entries;
  for (const ChunkRecord& r : want) entries.push_back({r.fingerprint, r.length});
  auto after_clean = clean.Insert("t", entries);
  auto after_retry = idx.Insert("t", entries);
  ASSERT_TRUE(after_clean.ok());
  ASSERT_TRUE(after_retry.ok());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ((*after_retry)[i].ref_count, (*after_clean)[i].ref_count) << i;
  }
}

// The commit policy: when a Dedup stream's chunks go to the index. Small
// chunks and a small engine window, so that every piece cuts chunks.
PipelineOptions SmallChunks(index::FingerprintIndex* idx) {
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.chunking.min_size = 256;
  opt.chunking.avg_size = 1024;
  opt.chunking.max_size = 4096;
  opt.engine.window_size = 64 << 10;
  opt.index = idx;
  opt.ns = "t";
  return opt;
}

size_t Sum(const std::vector<size_t>& v) {
  size_t sum = 0;
  for (size_t x : v) sum += x;
  return sum;
}

// Below kMaxPendingChunks chunks wait until the owner says no input waits;
// then they go in one batch, and nothing more is written until more come.
TEST(StreamPipelineTest, NoInputWaitingCommitsWhatWaitsInOneBatch) {
  RecordingIndex idx;
  auto p = StreamPipeline::Create(SmallChunks(&idx));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string data = RandomBytes(256 << 10, 5);
  std::vector<ChunkRecord> out;
  ASSERT_TRUE((*p)->Process(data, &out).ok());
  const uint64_t cut = (*p)->totals().chunks;
  ASSERT_GT(cut, 0u);
  ASSERT_LT(cut, StreamPipeline::kMaxPendingChunks);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(idx.batches.empty()) << "chunks wait for the owner's word";
  ASSERT_TRUE((*p)->NoInputWaiting(&out).ok());
  EXPECT_EQ(idx.batches, std::vector<size_t>({cut}));
  EXPECT_EQ(out.size(), cut);
  ASSERT_TRUE((*p)->NoInputWaiting(&out).ok());
  EXPECT_EQ(idx.batches.size(), 1u) << "nothing waits: no call";
  // The end of the stream commits the rest, in one more batch.
  ASSERT_TRUE((*p)->Finish(&out).ok());
  ASSERT_EQ(idx.batches.size(), 2u);
  EXPECT_EQ(out.size(), (*p)->totals().chunks);
  EXPECT_EQ(out.back().offset + out.back().length, data.size());
}

// Without a word from the owner, a batch goes as soon as kMaxPendingChunks
// chunks wait: never more wait after a call, and every batch but the last
// holds at least that many.
TEST(StreamPipelineTest, CommitsOnceMaxPendingChunksWait) {
  RecordingIndex idx;
  auto p = StreamPipeline::Create(SmallChunks(&idx));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string data = RandomBytes(3 << 20, 6);
  std::vector<ChunkRecord> out;
  for (size_t at = 0; at < data.size(); at += 64 << 10) {
    ASSERT_TRUE(
        (*p)->Process(absl::string_view(data).substr(at, 64 << 10), &out).ok());
    EXPECT_LT((*p)->totals().chunks - out.size(),
              StreamPipeline::kMaxPendingChunks)
        << at;
    EXPECT_EQ(Sum(idx.batches), out.size()) << at;
  }
  ASSERT_GE(idx.batches.size(), 2u);
  for (size_t batch : idx.batches) {
    EXPECT_GE(batch, StreamPipeline::kMaxPendingChunks);
  }
  const size_t before_finish = idx.batches.size();
  ASSERT_TRUE((*p)->Finish(&out).ok());
  EXPECT_EQ(idx.batches.size(), before_finish + 1);
  EXPECT_EQ(out.size(), (*p)->totals().chunks);
}

// With hints every call commits its own chunks (the follower needs to know
// whether the chunker's last chunk is a duplicate): nothing waits after a
// call, and the owner's word finds nothing to do.
TEST(StreamPipelineTest, WithHintsEveryCallCommitsItsChunks) {
  RecordingIndex idx;
  PipelineOptions opt = SmallChunks(&idx);
  opt.hints = HintTest::kFFRWTFPT;
  const std::string data = RandomBytes(1 << 20, 7);
  for (int stream = 0; stream < 2; ++stream) {
    auto p = StreamPipeline::Create(opt);
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<ChunkRecord> out;
    for (size_t at = 0; at < data.size(); at += 100000) {
      ASSERT_TRUE(
          (*p)->Process(absl::string_view(data).substr(at, 100000), &out).ok());
      EXPECT_EQ(out.size(), (*p)->totals().chunks) << stream << " " << at;
      const size_t batches = idx.batches.size();
      ASSERT_TRUE((*p)->NoInputWaiting(&out).ok());
      EXPECT_EQ(idx.batches.size(), batches);
    }
    ASSERT_TRUE((*p)->Finish(&out).ok());
    EXPECT_EQ(out.size(), (*p)->totals().chunks);
    // The second stream follows the hints of the first.
    if (stream == 1) {
      EXPECT_GT((*p)->totals().hints_accepted, 0u);
    }
  }
}

// Chunk streams have no index: records come out as they are cut.
TEST(StreamPipelineTest, ChunkRecordsComeOutAtOnce) {
  PipelineOptions opt = SmallChunks(nullptr);
  auto p = StreamPipeline::Create(opt);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string data = RandomBytes(256 << 10, 8);
  std::vector<ChunkRecord> out;
  ASSERT_TRUE((*p)->Process(data, &out).ok());
  EXPECT_GT(out.size(), 0u);
  EXPECT_EQ(out.size(), (*p)->totals().chunks);
}

TEST(StreamPipelineTest, DedupNeedsAFingerprint) {
  index::MemoryIndex idx;
  PipelineOptions opt;
  opt.chunking = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  opt.fingerprint = fingerprint::Kind::kNone;
  opt.index = &idx;
  opt.ns = "t";
  auto p = StreamPipeline::Create(opt);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chunkd::pipeline
