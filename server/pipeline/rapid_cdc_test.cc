#include "pipeline/rapid_cdc.h"

#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

chunking::ChunkerOptions FastCdc(uint32_t min, uint32_t avg, uint32_t max,
                                 uint32_t level, uint64_t seed = 0) {
  chunking::ChunkerOptions o = chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  o.min_size = min;
  o.avg_size = avg;
  o.max_size = max;
  o.normalization_level = level;
  o.seed = seed;
  return o;
}

TEST(HintTest, EncodingKeepsSizeAndMarker) {
  for (uint32_t size : {1u, 2u, 4096u, 65536u, 1u << 24}) {
    for (int marker : {0, 1, 0x7f, 0xff}) {
      const uint32_t hint = EncodeHint(size, static_cast<uint8_t>(marker));
      EXPECT_EQ(HintSize(hint), size);
      EXPECT_EQ(HintMarker(hint), marker);
    }
  }
  EXPECT_EQ(HintParamsKey(FastCdc(4096, 16384, 65536, 2, 666)),
            "fastcdc:4096:16384:65536:2:666");
}

}  // namespace
}  // namespace chunkd::pipeline
