#include "chunking/crc32.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/limits.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

// The definition (docs/design.md, "crc32: rolling CRC-32"), computed directly: CRC of the window of up
// to 256 bytes ending at p.
uint32_t WindowCrc(const Bytes& data, size_t p) {
  const size_t first =
      p >= kCrc32WindowSize - 1 ? p - (kCrc32WindowSize - 1) : 0;
  return Crc32Update(0, data.data() + first, p - first + 1);
}

ChunkerOptions Crc32(uint32_t min, uint32_t avg, uint32_t max) {
  ChunkerOptions options = DefaultOptions(Algorithm::kCrc32);
  options.min_size = min;
  options.avg_size = avg;
  options.max_size = max;
  return options;
}

TEST(Crc32Test, RegisterUpdateIsStandardCrc32) {
  // The standard CRC-32 (init ~0, final ~0) check value of "123456789".
  const std::string check = "123456789";
  const auto* bytes = reinterpret_cast<const uint8_t*>(check.data());
  EXPECT_EQ(Crc32Update(0xFFFFFFFFu, bytes, check.size()) ^ 0xFFFFFFFFu,
            0xCBF43926u);
  // Initial value 0, no final XOR: leading zeros do not change the value.
  const uint8_t zeros_then_check[] = {0, 0, 0, '1', '2', '3'};
  EXPECT_EQ(Crc32Update(0, zeros_then_check, 6), Crc32Update(0, bytes, 3));
  EXPECT_EQ(Crc32Update(0, bytes, 0), 0u);
}

TEST(Crc32Test, RollingEqualsDirectWindowCrcEverywhere) {
  const Bytes data = testing::RandomBytes(20000, 32);
  uint32_t crc = 0;
  for (size_t p = 0; p < data.size(); ++p) {
    if (p < kCrc32WindowSize) {
      crc = Crc32Update(crc, &data[p], 1);  // the window still grows
    } else {
      crc = Crc32Roll(crc, data[p - kCrc32WindowSize], data[p]);
    }
    ASSERT_EQ(crc, WindowCrc(data, p)) << "at " << p;
  }
}

// Stage 2's window CRC at a chunk starting at s: every offset p of the
// chunk, with the context a caller keeps (all bytes before s up to kContext,
// fewer only where the stream starts).
TEST(Crc32Test, WindowAtEqualsDirectWindowCrc) {
  const Bytes data = testing::RandomBytes(4096, 33);
  for (size_t s : {size_t{0}, size_t{1}, size_t{100}, size_t{255}, size_t{256},
                   size_t{1000}}) {
    const size_t context = std::min<size_t>(s, 256);
    for (size_t p = 0; s + p < data.size(); ++p) {
      ASSERT_EQ(Crc32WindowAt(data.data() + s, p, context),
                WindowCrc(data, s + p))
          << "chunk at " << s << ", offset " << p;
    }
  }
}

// An independent implementation of the spec, slow on purpose: every candidate
// test computes the window CRC from scratch.
std::vector<Chunk> DirectChunks(const Bytes& data, size_t min, size_t avg,
                                size_t max) {
  std::vector<Chunk> chunks;
  size_t s = 0;
  while (s < data.size()) {
    const size_t end = std::min(data.size(), s + max);
    Chunk chunk{s, static_cast<uint32_t>(end - s), 0};
    for (size_t p = s + min - 1; p < end; ++p) {
      const uint32_t crc = WindowCrc(data, p);
      if ((crc & (avg - 1)) == 0) {
        chunk.length = static_cast<uint32_t>(p - s + 1);
        chunk.hash = crc;
        break;
      }
    }
    chunks.push_back(chunk);
    s += chunk.length;
  }
  return chunks;
}

TEST(Crc32Test, ReferenceEqualsDirectDefinition) {
  // min < 256, so the window of a chunk's first candidates reaches back into
  // the previous chunk.
  for (const auto& [min, avg, max] :
       std::vector<std::tuple<uint32_t, uint32_t, uint32_t>>{
           {64, 256, 1024}, {100, 512, 1500}, {300, 1024, 4096}}) {
    for (const Bytes& data :
         {testing::RandomBytes(100000, min), testing::TextBytes(60000, avg)}) {
      const std::vector<Chunk> expected = DirectChunks(data, min, avg, max);
      const std::vector<Chunk> chunks =
          ReferenceChunks(Crc32(min, avg, max), data);
      ASSERT_EQ(chunks, expected) << min << "/" << avg << "/" << max;
      EXPECT_GT(chunks.size(), data.size() / max);
    }
  }
}

TEST(Crc32Test, CandidateCutsCarryTheirCrc) {
  const Bytes data = testing::RandomBytes(1 << 20, 7);
  const ChunkerOptions options = Crc32(2048, 16384, 65536);
  const std::vector<Chunk> chunks = ReferenceChunks(options, data);
  ASSERT_TRUE(testing::CoversStream(chunks, data.size(), options));
  size_t candidates = 0;
  for (const Chunk& c : chunks) {
    const size_t last = c.offset + c.length - 1;
    if (c.hash != 0) {
      ++candidates;
      EXPECT_EQ(c.hash, WindowCrc(data, last));
      EXPECT_EQ(c.hash & (16384 - 1), 0u);
    } else {
      // Cut by max or the end of the stream (a zero CRC is possible but
      // vanishingly rare on random data).
      EXPECT_TRUE(c.length == 65536 || last == data.size() - 1);
    }
  }
  EXPECT_GT(candidates, chunks.size() / 2);
  // The average is near min + avg for random data.
  EXPECT_GT(chunks.size(), data.size() / (2 * 18432));
  EXPECT_LT(chunks.size(), 2 * data.size() / 18432);
}

TEST(Crc32Test, ZerosAreCandidatesEverywhere) {
  // CRC(zeros) == 0, so every position is a candidate: chunks of exactly min.
  const Bytes zeros(10000, 0);
  const std::vector<Chunk> chunks =
      ReferenceChunks(Crc32(64, 256, 1024), zeros);
  ASSERT_EQ(chunks.size(), 157u);  // 156 * 64 + 16
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].length, 64u);
  }
  EXPECT_EQ(chunks.back().length, 16u);
}

TEST(Crc32Test, WindowIsStreamGlobal) {
  // A chunk starting at byte 1000 with min 64: its first candidate's window
  // covers 192 bytes of the previous chunk. Changing those bytes may move the
  // cut; changing bytes further back never does.
  Crc32Cutter cutter(64, 256, 1024);
  size_t moved = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Bytes data = testing::RandomBytes(3000, seed);
    Bytes near = data;
    Bytes far = data;
    for (size_t i = 1000 - 192; i < 1000; ++i) near[i] ^= 0xA5;
    for (size_t i = 0; i < 1000 - 192; ++i) far[i] ^= 0xA5;
    uint64_t h0 = 0, h1 = 0, h2 = 0;
    const size_t base = cutter.Cut(data.data() + 1000, 2000, 1000, &h0);
    const size_t with_near = cutter.Cut(near.data() + 1000, 2000, 1000, &h1);
    const size_t with_far = cutter.Cut(far.data() + 1000, 2000, 1000, &h2);
    EXPECT_EQ(with_far, base);
    EXPECT_EQ(h2, h0);
    // Only kContext bytes of context are needed.
    uint64_t h3 = 0;
    EXPECT_EQ(cutter.Cut(data.data() + 1000, 2000, 256, &h3), base);
    EXPECT_EQ(h3, h0);
    if (with_near != base) ++moved;
  }
  EXPECT_GT(moved, 0u);
}

}  // namespace
}  // namespace chunkd::chunking
