// Golden cases derived by hand from the authors' find_cutpoint
// (UWASL/dedup-bench dedup/src/chunking/seq_chunking.cpp); each comment gives
// the trace.
#include "chunking/seqcdc.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

constexpr size_t kMin = 64;
constexpr size_t kMax = 1024;

ChunkerOptions Seq(SeqMode mode, uint32_t seq_length, uint32_t skip_trigger,
                   uint32_t skip_size) {
  ChunkerOptions options = DefaultOptions(Algorithm::kSeqCdc);
  options.seq_mode = mode;
  options.min_size = kMin;
  options.avg_size = 256;
  options.max_size = kMax;
  options.seq_length = seq_length;
  options.skip_trigger = skip_trigger;
  options.skip_size = skip_size;
  return options;
}

const ChunkerOptions kInc = Seq(SeqMode::kIncreasing, 5, 50, 512);
const ChunkerOptions kDec = Seq(SeqMode::kDecreasing, 5, 50, 512);

// `prefix` bytes of `fill`, then `tail`, then `fill` up to `size`.
Bytes Make(size_t prefix, uint8_t fill, const std::vector<uint8_t>& tail,
           size_t size = 2000) {
  Bytes out;
  out.reserve(std::max(size, prefix + tail.size()));
  for (size_t i = 0; i < prefix; ++i) out.push_back(fill);
  for (uint8_t b : tail) out.push_back(b);
  const uint8_t last = out.empty() ? fill : out.back();
  while (out.size() < size) out.push_back(last);
  return out;
}

std::vector<uint32_t> Lengths(const ChunkerOptions& options,
                              const Bytes& data) {
  std::vector<uint32_t> lengths;
  for (const Chunk& c : ReferenceChunks(options, data)) {
    lengths.push_back(c.length);
    EXPECT_EQ(c.hash, 0u);
  }
  return lengths;
}

size_t FirstCut(const ChunkerOptions& options, const Bytes& data) {
  return ReferenceChunks(options, data).front().length;
}

TEST(SeqCdcTest, RunCompletedByByteThatStartsNextChunk) {
  // Steps (63,64) .. (67,68) rise 0x10 -> 0x15: the run reaches 5 at the step
  // ending at byte 68, so the chunk is [0, 68) and byte 68 starts the next.
  const Bytes data = Make(64, 0x10, {0x11, 0x12, 0x13, 0x14, 0x15});
  EXPECT_EQ(FirstCut(kInc, data), 68u);
}

TEST(SeqCdcTest, ScanStartsWithStepIntoByteMin) {
  // Bytes 60..63 already rise, but the first step examined is (63, 64): the
  // run counts 1 there and completes at byte 68, not at byte 64.
  Bytes data(60, 0x80);
  for (uint8_t b : {0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89}) {
    data.push_back(b);
  }
  data.resize(2000, 0x89);
  EXPECT_EQ(FirstCut(kInc, data), 68u);
}

TEST(SeqCdcTest, EqualBytesNeitherExtendNorBreakRun) {
  // 0x11 0x11 0x12 0x12 0x13 0x14 0x15 at bytes 64..70: equal steps at 65 and
  // 67 are skipped; rises at 64, 66, 68, 69, 70 -> cut before byte 70.
  const Bytes data = Make(64, 0x10, {0x11, 0x11, 0x12, 0x12, 0x13, 0x14, 0x15});
  EXPECT_EQ(FirstCut(kInc, data), 70u);
}

TEST(SeqCdcTest, OpposingStepResetsRun) {
  // Rises at 64..67 (run 4), a fall at 68 resets it, rises at 69..73 complete
  // a new run of 5 at byte 73.
  const Bytes data = Make(
      64, 0x10, {0x11, 0x12, 0x13, 0x14, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06});
  EXPECT_EQ(FirstCut(kInc, data), 73u);
}

TEST(SeqCdcTest, DecreasingModeMirrors) {
  const Bytes falling = Make(64, 0x80, {0x7F, 0x7E, 0x7D, 0x7C, 0x7B});
  EXPECT_EQ(FirstCut(kDec, falling), 68u);
  // The rising input has no falling run: decreasing mode cuts at max.
  const Bytes rising = Make(64, 0x10, {0x11, 0x12, 0x13, 0x14, 0x15});
  EXPECT_EQ(FirstCut(kDec, rising), kMax);
  EXPECT_EQ(FirstCut(kInc, falling), kMax);
}

TEST(SeqCdcTest, JumpSkipsBytesAndLandsAfterTheTriggeringStep) {
  // SkipTrigger 3, SkipSize 16. Bytes 64..68 = 70 78 70 78 70: falls at 64,
  // 66 and 68 (rises at 65, 67 only make runs of 1; they do not reset the
  // opposing counter). The third fall, the step ending at byte 68, triggers
  // the jump: the scan position is already 69 and moves to 85, so bytes
  // 69..84 — a ramp 01..10 that would cut at byte 74 — are never compared.
  // The next step is (84, 85) = (10, 20): rises at 85..89 cut before 89.
  std::vector<uint8_t> tail = {0x70, 0x78, 0x70, 0x78, 0x70};
  for (uint8_t b = 0x01; b <= 0x10; ++b) tail.push_back(b);  // bytes 69..84
  for (uint8_t b : {0x20, 0x30, 0x40, 0x50, 0x60}) tail.push_back(b);
  const Bytes data = Make(64, 0x80, tail);
  ASSERT_EQ(data[84], 0x10);
  ASSERT_EQ(data[85], 0x20);
  EXPECT_EQ(FirstCut(Seq(SeqMode::kIncreasing, 5, 3, 16), data), 89u);
  // Without the jump (trigger never reached) the ramp cuts at byte 74.
  EXPECT_EQ(FirstCut(Seq(SeqMode::kIncreasing, 5, 50, 16), data), 74u);
}

TEST(SeqCdcTest, OpposingCounterResetsOnlyByJump) {
  // SkipTrigger 2, SkipSize 1000 (beyond max): falls at 64 and 70 are not
  // consecutive — rises at 65..68 (run 4) lie between — yet the second fall
  // reaches the trigger and the jump past max ends the chunk at max.
  const Bytes data = Make(
      64, 0x80,
      {0x70, 0x71, 0x72, 0x73, 0x74, 0x74, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65});
  EXPECT_EQ(FirstCut(Seq(SeqMode::kIncreasing, 5, 2, 1000), data), kMax);
  // With trigger 3 there is no jump: the rises after byte 70 cut at 75.
  EXPECT_EQ(FirstCut(Seq(SeqMode::kIncreasing, 5, 3, 1000), data), 75u);
}

TEST(SeqCdcTest, JumpLandingAtOrPastEndTakesWholeBuffer) {
  // One fall at byte 64 with trigger 1 jumps from 65 to 65 + 500 = 565. With
  // 600 bytes in the stream the scan resumes; with 560 the chunk is all 560.
  Bytes data = Make(64, 0x80, {0x00}, 600);
  for (size_t i = 565; i < 600; ++i) data[i] = static_cast<uint8_t>(i - 500);
  // Steps from (564, 565): 0x00 -> 0x41 rise, then +1 each: cut at 569.
  EXPECT_EQ(FirstCut(Seq(SeqMode::kIncreasing, 5, 1, 500), data), 569u);
  const Bytes shorter(data.begin(), data.begin() + 560);
  EXPECT_EQ(Lengths(Seq(SeqMode::kIncreasing, 5, 1, 500), shorter),
            std::vector<uint32_t>{560});
}

TEST(SeqCdcTest, MaxCapAndTail) {
  // No runs at all: chunks of max, then the tail.
  EXPECT_EQ(Lengths(kInc, Bytes(3000, 0x42)),
            (std::vector<uint32_t>{1024, 1024, 952}));
  // A run whose completing step ends at byte max - 1 still cuts there...
  Bytes edge(kMax - 5, 0x10);
  for (uint8_t b : {0x11, 0x12, 0x13, 0x14, 0x15}) edge.push_back(b);
  edge.resize(3000, 0x15);
  ASSERT_EQ(edge[kMax - 1], 0x15);
  EXPECT_EQ(FirstCut(kInc, edge), kMax - 1);
  // ... but one ending at byte max is never examined: the chunk is max long.
  Bytes beyond(kMax - 4, 0x10);
  for (uint8_t b : {0x11, 0x12, 0x13, 0x14, 0x15}) beyond.push_back(b);
  beyond.resize(3000, 0x15);
  EXPECT_EQ(FirstCut(kInc, beyond), kMax);
}

TEST(SeqCdcTest, ShortStreams) {
  // Fewer than min bytes: one chunk as it is; min bytes exactly: no step is
  // examined (the scan starts at byte min).
  EXPECT_EQ(Lengths(kInc, testing::RandomBytes(50, 1)),
            std::vector<uint32_t>{50});
  EXPECT_EQ(Lengths(kInc, Bytes(64, 0x10)), std::vector<uint32_t>{64});
  EXPECT_TRUE(Lengths(kInc, Bytes()).empty());
  // A rising tail after min: cut, then the rest (shorter than min) is last.
  const Bytes data = Make(64, 0x10, {0x11, 0x12, 0x13, 0x14, 0x15}, 69);
  EXPECT_EQ(Lengths(kInc, data), (std::vector<uint32_t>{68, 1}));
}

TEST(SeqCdcTest, Sawtooth) {
  // Byte i is i % 10, so the step ending at i rises unless i % 10 == 0. A
  // chunk from s scans steps from s + 64 and cuts before the first q with
  // five rising steps ending at q - 4 .. q, all at or after s + 64:
  //   s = 0:   steps from 64 (values 4..8) -> q = 68, length 68
  //   s = 68:  steps from 132 (2..6)       -> q = 136, length 68
  //   s = 136: step 200 falls (9 -> 0)     -> q = 205, length 69
  //   s = 205: step 270 falls              -> q = 275, length 70
  //   and from there on every chunk is 70 (s % 10 == 5 again).
  Bytes data(2000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = i % 10;
  const std::vector<uint32_t> lengths = Lengths(kInc, data);
  ASSERT_GE(lengths.size(), 25u);
  EXPECT_EQ(lengths[0], 68u);
  EXPECT_EQ(lengths[1], 68u);
  EXPECT_EQ(lengths[2], 69u);
  for (size_t i = 3; i + 1 < lengths.size(); ++i) EXPECT_EQ(lengths[i], 70u);
}

TEST(SeqCdcTest, AuthorsProfilesOnRandomData) {
  const Bytes data = testing::RandomBytes(4 << 20, 2024);
  for (const char* name : {"seqcdc-8k", "seqcdc-16k"}) {
    const ChunkerOptions options = Preset(name).value();
    const std::vector<Chunk> chunks = ReferenceChunks(options, data);
    EXPECT_TRUE(testing::CoversStream(chunks, data.size(), options)) << name;
    // Random bytes rarely form runs of 5 rises (1/120 per position after a
    // fall), so chunks end well between min and max on average.
    const double mean = static_cast<double>(data.size()) / chunks.size();
    EXPECT_GT(mean, options.min_size) << name;
    EXPECT_LT(mean, options.max_size) << name;
  }
}

}  // namespace
}  // namespace chunkd::chunking
