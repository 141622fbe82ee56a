// FastCdcGroup: every set's chunks equal ReferenceChunks of the whole
// stream, for any split into pieces and every kernel set this CPU runs;
// ChunkData gives each chunk's bytes; memory does not grow with the
// stream; bad sets are refused naming the set.

#include "chunking/fastcdc_group.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/fastcdc.h"
#include "chunking/kernels/kernels.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;
using testing::FastCdcOptions;

// The estimator's case: avg 4/8/16/64 KiB, min avg/4, max avg*4.
std::vector<ChunkerOptions> FourSets(uint64_t seed) {
  return {FastCdcOptions(1024, 4096, 16384, 1, seed),
          FastCdcOptions(2048, 8192, 32768, 2, seed),
          FastCdcOptions(4096, 16384, 65536, 1, seed),
          FastCdcOptions(16384, 65536, 262144, 2, seed)};
}

// Small and mixed sizes, odd min sizes, every level: the filters cannot all
// be merged, so the kernel runs more than once per block.
std::vector<ChunkerOptions> SixteenSets(uint64_t seed) {
  std::vector<ChunkerOptions> sets;
  const uint32_t avgs[] = {256, 300, 512, 1000, 2048, 4096, 8192, 12345};
  for (int i = 0; i < 16; ++i) {
    const uint32_t avg = avgs[i % 8];
    const uint32_t min = std::max<uint32_t>(64, avg / 4 + (i % 3 == 0 ? 1 : 0));
    const uint32_t max = std::max<uint32_t>(1024, avg * (2 + i % 4));
    sets.push_back(
        FastCdcOptions(min, avg, max, static_cast<uint32_t>(i % 4), seed));
  }
  return sets;
}

// Whole: one piece; one byte at a time; random sizes.
enum class Split { kWhole, kOneByte, kRandom };

// Feeds `data` as `split` says and checks each chunk's bytes as it comes.
std::vector<std::vector<Chunk>> RunGroup(FastCdcGroup& group, const Bytes& data,
                                         Split split, uint64_t seed) {
  std::vector<std::vector<Chunk>> all;
  std::mt19937_64 rng(seed);
  auto check = [&](std::vector<std::vector<Chunk>>& out) {
    all.resize(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      for (const Chunk& c : out[i]) {
        const absl::string_view bytes = group.ChunkData(c);
        ASSERT_EQ(bytes.size(), c.length) << "set " << i << " at " << c.offset;
        ASSERT_EQ(0, memcmp(bytes.data(), data.data() + c.offset, c.length))
            << "set " << i << " at " << c.offset;
        all[i].push_back(c);
      }
      out[i].clear();
    }
  };
  std::vector<std::vector<Chunk>> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t n = data.size() - pos;
    if (split == Split::kOneByte) n = 1;
    if (split == Split::kRandom) {
      // Small pieces, gathered, and large ones, cut in place (from
      // 2 * (max_size + 64) bytes on) with a junction after a carry.
      const uint64_t r = rng();
      n = std::min<size_t>(
          n, r % 2 == 0 ? 1 + (r >> 1) % 300000 : 530000 + (r >> 1) % 700000);
    }
    group.Append(
        absl::string_view(reinterpret_cast<const char*>(data.data()) + pos, n),
        &out);
    check(out);
    pos += n;
  }
  group.Finish(&out);
  check(out);
  return all;
}

class FastCdcGroupTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<const kernels::KernelSet*> k =
        kernels::FindKernelSet(GetParam());
    if (!k.ok()) GTEST_SKIP() << k.status().message();
    kernel_ = *k;
  }

  void Expect(const std::vector<ChunkerOptions>& sets, const Bytes& data,
              Split split) {
    EngineOptions engine;
    engine.kernel = kernel_;
    absl::StatusOr<std::unique_ptr<FastCdcGroup>> group =
        FastCdcGroup::Create(sets, engine);
    ASSERT_TRUE(group.ok()) << group.status();
    EXPECT_STREQ((*group)->kernel_name(), kernel_->name);
    const std::vector<std::vector<Chunk>> got =
        RunGroup(**group, data, split, data.size());
    ASSERT_EQ(got.size(), sets.size());
    EXPECT_EQ((*group)->bytes_in(), data.size());
    for (size_t i = 0; i < sets.size(); ++i) {
      const std::vector<Chunk> want =
          ReferenceChunks(sets[i], absl::MakeConstSpan(data));
      ASSERT_EQ(got[i].size(), want.size()) << "set " << i;
      for (size_t c = 0; c < want.size(); ++c) {
        ASSERT_EQ(got[i][c], want[c]) << "set " << i << " chunk " << c;
      }
    }
  }

  const kernels::KernelSet* kernel_ = nullptr;
};

TEST_P(FastCdcGroupTest, RandomDataEverySplit) {
  const Bytes data = testing::RandomBytes(3 << 20, 31);
  for (uint64_t seed : {uint64_t{0}, uint64_t{0x5eed5eed12345678}}) {
    for (Split split : {Split::kWhole, Split::kRandom}) {
      SCOPED_TRACE(seed);
      Expect(FourSets(seed), data, split);
      Expect({FastCdcOptions(64, 256, 1024, 3, seed)}, data, split);
      Expect({FastCdcOptions(4097, 16384, 65536, 2, seed),
              FastCdcOptions(8191, 32768, 131072, 0, seed)},
             data, split);
    }
  }
}

TEST_P(FastCdcGroupTest, SixteenMixedSets) {
  const Bytes data = testing::RandomBytes(1 << 20, 7);
  for (uint64_t seed : {uint64_t{0}, uint64_t{99}}) {
    for (Split split : {Split::kWhole, Split::kRandom}) {
      Expect(SixteenSets(seed), data, split);
    }
  }
}

TEST_P(FastCdcGroupTest, OneBytePieces) {
  const Bytes data = testing::RandomBytes(150000, 3);
  Expect(FourSets(0), data, Split::kOneByte);
  Expect(SixteenSets(5), data, Split::kOneByte);
}

TEST_P(FastCdcGroupTest, LowEntropyData) {
  const std::vector<Bytes> inputs = {
      testing::ConstantBytes(1 << 20, 0), testing::ConstantBytes(600000, 0xA5),
      testing::RepeatingBytes(1 << 20, "abc"),
      testing::RepeatingBytes(700000, std::string(5000, 'x') + "y"),
      testing::TextBytes(1 << 20, 11)};
  // Seeds under which runs of one byte value pass or fail the masks. With
  // the seed gear[0], a seeded entry of 0 is 0, so W(p) is 0 on a run of
  // zeros: every position there passes every mask and is a candidate.
  const uint64_t zero_passes = FastCdcGearTable()[0];
  for (uint64_t seed :
       {uint64_t{0}, uint64_t{1}, uint64_t{0xFFFFFFFFFFFF}, zero_passes}) {
    for (const Bytes& data : inputs) {
      for (Split split : {Split::kWhole, Split::kRandom}) {
        Expect(FourSets(seed), data, split);
        Expect(SixteenSets(seed), data, split);
      }
    }
  }
}

TEST_P(FastCdcGroupTest, ShortAndEmptyStreams) {
  for (size_t size : {0, 1, 63, 64, 65, 200, 1023, 1025, 5000, 17000}) {
    const Bytes data = testing::RandomBytes(size, size);
    Expect(FourSets(0), data, Split::kWhole);
    Expect(SixteenSets(3), data, Split::kOneByte);
  }
}

TEST_P(FastCdcGroupTest, SparseFilterForLargeAveragesAndSeveralForSmall) {
  EngineOptions engine;
  engine.kernel = kernel_;
  absl::StatusOr<std::unique_ptr<FastCdcGroup>> four =
      FastCdcGroup::Create(FourSets(0), engine);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ((*four)->kernel_runs_per_block(), 1u);
  absl::StatusOr<std::unique_ptr<FastCdcGroup>> sixteen =
      FastCdcGroup::Create(SixteenSets(0), engine);
  ASSERT_TRUE(sixteen.ok()) << sixteen.status();
  EXPECT_GT((*sixteen)->kernel_runs_per_block(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Kernels, FastCdcGroupTest,
                         ::testing::ValuesIn(testing::KernelNames()),
                         [](const auto& info) { return info.param; });

// Memory stays within the sets' max_size and the scan window whatever the
// stream's length and the pieces' sizes.
TEST(FastCdcGroupMemoryTest, BoundedWhateverTheStreamLength) {
  const std::vector<ChunkerOptions> sets = FourSets(0);
  const size_t max_size = 262144;
  for (size_t piece : {size_t{4096}, size_t{1} << 20, size_t{3} << 20}) {
    absl::StatusOr<std::unique_ptr<FastCdcGroup>> group =
        FastCdcGroup::Create(sets, EngineOptions());
    ASSERT_TRUE(group.ok()) << group.status();
    const Bytes data = testing::RandomBytes(piece, piece);
    std::vector<std::vector<Chunk>> out;
    size_t most = 0;
    // 48 MiB of stream, the same piece again and again.
    for (size_t fed = 0; fed < (size_t{48} << 20); fed += piece) {
      (*group)->Append(
          absl::string_view(reinterpret_cast<const char*>(data.data()), piece),
          &out);
      most = std::max(most, (*group)->memory_bytes());
      for (auto& o : out) o.clear();
    }
    EXPECT_LE(most, 4 * max_size + 4 * FastCdcGroup::kScanBlock + 2 * piece +
                        (size_t{64} << 10))
        << "pieces of " << piece;
  }
}

TEST(FastCdcGroupErrorTest, RefusesBadSetsNamingThem) {
  const EngineOptions engine;
  auto error = [&](const std::vector<ChunkerOptions>& sets) {
    absl::StatusOr<std::unique_ptr<FastCdcGroup>> g =
        FastCdcGroup::Create(sets, engine);
    EXPECT_FALSE(g.ok());
    return g.status();
  };
  absl::Status s = error({});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1 to 16"), absl::string_view::npos) << s;
  s = error(std::vector<ChunkerOptions>(17, FastCdcOptions(64, 256, 1024, 1)));
  EXPECT_NE(s.message().find("not 17"), absl::string_view::npos) << s;

  ChunkerOptions crc = DefaultOptions(Algorithm::kCrc32);
  s = error({FastCdcOptions(64, 256, 1024, 1), crc});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("set 1: algorithm crc32"), absl::string_view::npos)
      << s;
  s = error({FastCdcOptions(64, 256, 1024, 1), FastCdcOptions(64, 256, 1024, 1),
             FastCdcOptions(4096, 1024, 65536, 1)});
  EXPECT_NE(s.message().find("set 2: "), absl::string_view::npos) << s;
  s = error({FastCdcOptions(64, 256, 1024, 1, 5),
             FastCdcOptions(64, 256, 1024, 1, 6)});
  EXPECT_NE(s.message().find("set 1: seed 6"), absl::string_view::npos) << s;
}

TEST(FastCdcGroupErrorTest, RefusesAKernelSetThisCpuLacks) {
  kernels::KernelSet unsupported = kernels::ScalarKernelSet();
  unsupported.name = "none";
  unsupported.supported = [] { return false; };
  EngineOptions engine;
  engine.kernel = &unsupported;
  absl::StatusOr<std::unique_ptr<FastCdcGroup>> g =
      FastCdcGroup::Create(FourSets(0), engine);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("\"none\""), absl::string_view::npos);
}

}  // namespace
}  // namespace chunkd::chunking
