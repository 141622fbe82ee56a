#include "chunking/fastcdc_boundary.h"

#include <algorithm>
#include <vector>

#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::FastCdcOptions;

// Against the reference: at every reference chunk's end the boundary holds,
// and at no position before it (the reference would have cut there).
// Parameters include odd sizes and every level; the data includes runs of
// zeros, where only max cuts happen.
TEST(FastCdcBoundaryTest, HoldsExactlyWhereTheReferenceCuts) {
  struct Case {
    ChunkerOptions options;
    size_t size;
  };
  const Case cases[] = {
      {FastCdcOptions(4096, 16384, 65536, 2), 3 << 20},
      {FastCdcOptions(256, 1024, 4096, 1), 1 << 20},
      {FastCdcOptions(255, 1000, 4001, 3, 666), 1 << 20},
      {FastCdcOptions(64, 256, 1024, 0), 256 << 10},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> data = testing::RandomBytes(c.size, 11);
    std::fill(data.begin() + c.size / 2, data.begin() + c.size / 2 + 20000, 0);
    const FastCdcBoundary boundary(c.options);
    const auto chunks = ReferenceChunks(c.options, data);
    ASSERT_GT(chunks.size(), 20u);
    size_t checked = 0;
    for (const Chunk& chunk : chunks) {
      const uint8_t* start = data.data() + chunk.offset;
      const size_t avail = data.size() - chunk.offset;
      ASSERT_TRUE(boundary.Holds(start, avail, /*at_end=*/true, chunk.length))
          << "chunk at " << chunk.offset << " of " << chunk.length;
      const bool last = chunk.offset + chunk.length == data.size();
      if (!last && avail >= boundary.Needed(chunk.length)) {
        ASSERT_TRUE(boundary.Holds(start, avail, false, chunk.length))
            << chunk.offset;
      }
      for (size_t s = 1; s < chunk.length; ++s) {
        ASSERT_FALSE(boundary.Holds(start, avail, true, s))
            << "chunk at " << chunk.offset << ": a cut at " << s
            << " would not be the reference's";
        ASSERT_FALSE(boundary.Holds(start, avail, false, s)) << chunk.offset;
      }
      ++checked;
    }
    EXPECT_EQ(checked, chunks.size());
  }
}

// Near the stream's end a position the reference never tests must not pass,
// even when the hash condition holds there.
TEST(FastCdcBoundaryTest, NeedsBytesBeyondTheCutUntilTheEndIsKnown) {
  const auto options = FastCdcOptions(64, 256, 1024, 1);
  const FastCdcBoundary boundary(options);
  const std::vector<uint8_t> data = testing::RandomBytes(1 << 16, 5);
  const auto chunks = ReferenceChunks(options, data);
  size_t hash_cuts = 0;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (c.length == options.max_size) continue;
    ++hash_cuts;
    const uint8_t* start = data.data() + c.offset;
    // With only the chunk and its next byte, and the end unknown, the test
    // cannot decide: a stream ending right there would not test it.
    EXPECT_FALSE(boundary.Holds(start, c.length + 1, false, c.length));
    EXPECT_EQ(boundary.Needed(c.length), c.length + 2);
    EXPECT_TRUE(boundary.Holds(start, c.length + 2, false, c.length));
    // A stream that really ends one byte after the cut: FastCDC tests only
    // positions below an even bound.
    EXPECT_EQ(boundary.Holds(start, c.length + 1, true, c.length),
              (c.length + 1) % 2 == 0);
  }
  EXPECT_GT(hash_cuts, 20u);
}

// Sizes it can never accept, whatever the bytes.
TEST(FastCdcBoundaryTest, RefusesSizesOutsideTheChunk) {
  const auto options = FastCdcOptions(256, 1024, 4096, 1);
  const FastCdcBoundary boundary(options);
  const std::vector<uint8_t> data = testing::RandomBytes(8192, 3);
  EXPECT_FALSE(boundary.Holds(data.data(), data.size(), true, 0));
  EXPECT_FALSE(boundary.Holds(data.data(), data.size(), true, 4097));
  EXPECT_FALSE(boundary.Holds(data.data(), 100, true, 101));
  // Shorter than min (rounded down to even) only where the stream ends.
  EXPECT_FALSE(boundary.Holds(data.data(), data.size(), true, 200));
  EXPECT_TRUE(boundary.Holds(data.data(), 200, true, 200));
  // max_size always, once its bytes are there.
  EXPECT_TRUE(boundary.Holds(data.data(), 4096, false, 4096));
  EXPECT_EQ(boundary.Needed(4096), 4096u);
  EXPECT_EQ(boundary.max_size(), 4096u);
}

}  // namespace
}  // namespace chunkd::chunking
