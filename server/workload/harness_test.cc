#include "workload/harness.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "workload/datagen.h"

namespace chunkd::workload {
namespace {

using chunking::Algorithm;
using chunking::Chunk;
using ::testing::HasSubstr;

TEST(DatasetTest, NamesRoundTrip) {
  for (Dataset d : {Dataset::kRandom, Dataset::kVersioned}) {
    absl::StatusOr<Dataset> parsed = ParseDataset(DatasetName(d));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, d);
  }
  absl::StatusOr<Dataset> bad = ParseDataset("zeros");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("random or versioned"));
}

TEST(DatasetTest, SizesAndSeeds) {
  EXPECT_EQ(MakeDataset(Dataset::kRandom, 12345),
            RandomBytes(12345, kBenchSeed));
  const std::vector<uint8_t> versioned =
      MakeDataset(Dataset::kVersioned, 8 << 20);
  // Eight versions of ~1 MiB; each of the 7 edited ones moves by < 15 KB.
  EXPECT_NEAR(static_cast<double>(versioned.size()), 8 << 20, 7 * 15000);
  // The base file is the first eighth.
  const std::vector<uint8_t> base = RandomBytes(1 << 20, kBenchSeed);
  EXPECT_TRUE(std::equal(base.begin(), base.end(), versioned.begin()));
}

TEST(BenchOptionsTest, TheTargetsParameters) {
  const chunking::ChunkerOptions fastcdc = BenchOptions(Algorithm::kFastCdc);
  EXPECT_EQ(fastcdc.min_size, 4096u);
  EXPECT_EQ(fastcdc.avg_size, 16384u);
  EXPECT_EQ(fastcdc.max_size, 65536u);
  EXPECT_EQ(fastcdc.normalization_level, 2u);
  const chunking::ChunkerOptions crc32 = BenchOptions(Algorithm::kCrc32);
  EXPECT_EQ(crc32.min_size, 2048u);
  EXPECT_EQ(crc32.avg_size, 16384u);
  EXPECT_EQ(crc32.max_size, 65536u);
  const chunking::ChunkerOptions seqcdc = BenchOptions(Algorithm::kSeqCdc);
  absl::StatusOr<chunking::ChunkerOptions> preset =
      chunking::Preset("seqcdc-16k");
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_EQ(seqcdc.min_size, preset->min_size);
  EXPECT_EQ(seqcdc.max_size, preset->max_size);
  EXPECT_EQ(seqcdc.seq_length, preset->seq_length);
  EXPECT_EQ(seqcdc.skip_trigger, preset->skip_trigger);
  EXPECT_EQ(seqcdc.skip_size, preset->skip_size);
  EXPECT_EQ(BenchOptions(Algorithm::kFixed).avg_size, 16384u);
  for (Algorithm a : chunking::AllAlgorithms()) {
    EXPECT_TRUE(chunking::ValidateOptions(BenchOptions(a)).ok());
  }
}

TEST(CompareChunksTest, NamesTheFirstDifference) {
  const std::vector<Chunk> want = {{0, 10, 1}, {10, 20, 2}, {30, 5, 3}};
  EXPECT_TRUE(CompareChunks(want, want).ok());

  std::vector<Chunk> moved = want;
  moved[1].length = 21;
  absl::Status s = CompareChunks(want, moved);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("chunk 1 of 3"));
  EXPECT_THAT(s.message(), HasSubstr("length 21"));

  std::vector<Chunk> rehashed = want;
  rehashed[2].hash = 0xabc;
  EXPECT_THAT(CompareChunks(want, rehashed).message(), HasSubstr("0xabc"));

  const std::vector<Chunk> shorter(want.begin(), want.begin() + 2);
  EXPECT_THAT(CompareChunks(want, shorter).message(),
              HasSubstr("got 2 chunks, want 3"));
  EXPECT_FALSE(CompareChunks(shorter, want).ok());
}

TEST(CeilingTest, SumWordsIsTheWordSum) {
  std::vector<uint8_t> bytes(19);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<uint8_t>(i + 1);
  // Words 0x0807060504030201, 0x100f0e0d0c0b0a09 and the zero-padded tail
  // 0x131211.
  EXPECT_EQ(SumWords(bytes.data(), bytes.size()),
            0x0807060504030201ULL + 0x100f0e0d0c0b0a09ULL + 0x131211ULL);
  EXPECT_EQ(SumWords(bytes.data(), 0), 0u);
}

TEST(CeilingTest, ParallelEqualsSequential) {
  const size_t size = 3 * kCeilingPiece + 12345;
  const std::vector<uint8_t> data = RandomBytes(size, 5);
  const uint64_t want = SumWords(data.data(), data.size());
  EXPECT_EQ(SumWordsParallel(nullptr, data.data(), data.size()), want);
  chunking::ThreadPoolExecutor pool(2);
  EXPECT_EQ(SumWordsParallel(&pool, data.data(), data.size()), want);

  std::vector<uint8_t> copy(size);
  CopyParallel(&pool, copy.data(), data.data(), size);
  EXPECT_EQ(copy, data);
}

}  // namespace
}  // namespace chunkd::workload
