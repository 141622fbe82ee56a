#include "pipeline/stream_pipeline.h"

#include <random>

#include "chunking/executor.h"
#include "gtest/gtest.h"
#include "index/memory_index.h"

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
