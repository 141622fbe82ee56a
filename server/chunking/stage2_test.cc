// Stage 2 building blocks against naive definitions, and the SeqCDC word
// state machine against the reference cutter on inputs made to hit its edge
// cases (runs across words, equal bytes inside runs, jumps landing mid-word
// and past the end, every SeqLength from 1 to 64).
#include "chunking/stage2.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/seqcdc.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking::stage2 {
namespace {

using testing::Bytes;

int NaiveSelect(uint64_t x, int k) {
  for (int i = 0; i < 64; ++i) {
    if ((x >> i) & 1) {
      if (k-- == 0) return i;
    }
  }
  return -1;
}

TEST(Stage2BitsTest, Select64MatchesNaive) {
  std::mt19937_64 rng(1);
  for (int round = 0; round < 20000; ++round) {
    uint64_t x = rng();
    if (round % 3 == 1) x &= rng();
    if (round % 3 == 2) x |= rng();
    if (round == 0) x = ~uint64_t{0};
    if (round == 1) x = uint64_t{1} << 63;
    const int n = PopCount(x);
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(Select64(x, k), NaiveSelect(x, k)) << std::hex << x << " " << k;
    }
  }
}

TEST(Stage2BitsTest, BitsAtAndLowMask) {
  const uint64_t words[3] = {0x0123456789abcdef, 0xfedcba9876543210, 0};
  EXPECT_EQ(BitsAt(words, 0), words[0]);
  EXPECT_EQ(BitsAt(words, 64), words[1]);
  EXPECT_EQ(BitsAt(words, 4), (words[0] >> 4) | (words[1] << 60));
  EXPECT_EQ(LowMask(0), 0u);
  EXPECT_EQ(LowMask(5), 31u);
  EXPECT_EQ(LowMask(64), ~uint64_t{0});
}

// FindFirstInWords against a bit-by-bit search, on a ring of 64 words that
// the range wraps around (and on a plain array), with bitmaps from empty to
// dense, every start offset within a word and lengths across the 8-word
// blocks.
TEST(Stage2BitsTest, FindFirstInWordsMatchesNaive) {
  std::mt19937_64 rng(17);
  constexpr uint64_t kRing = 64;
  for (int density : {0, 1, 3, 40, 2000, 100000}) {
    // The ring holds stream words [g0, g0 + kRing); g0 puts the wrap inside.
    const uint64_t origin = 1000 + 64 * 5;
    const uint64_t g0 = 37;
    std::vector<uint64_t> ring(kRing, 0);
    std::vector<uint64_t> plain(kRing, 0);
    for (uint64_t i = 0; i < kRing * 64; ++i) {
      if (density > 0 && rng() % 100000 < static_cast<uint64_t>(density)) {
        const uint64_t g = g0 + i / 64;
        ring[g & (kRing - 1)] |= uint64_t{1} << (i % 64);
        plain[i / 64] |= uint64_t{1} << (i % 64);
      }
    }
    const auto naive = [&](uint64_t lo, uint64_t hi) {
      for (uint64_t p = lo; p < hi; ++p) {
        const uint64_t rel = p - origin - 64 * g0;
        if ((plain[rel / 64] >> (rel % 64)) & 1) return p;
      }
      return hi;
    };
    const uint64_t first = origin + 64 * g0;
    for (int trial = 0; trial < 3000; ++trial) {
      const uint64_t lo = first + rng() % (kRing * 64);
      const uint64_t hi = lo + rng() % (first + kRing * 64 - lo + 1);
      ASSERT_EQ(FindFirstInWords(ring.data(), kRing - 1, origin, lo, hi),
                naive(lo, hi))
          << "density " << density << " lo " << lo << " hi " << hi;
      ASSERT_EQ(FindFirstInWords(plain.data(), ~uint64_t{0}, first, lo, hi),
                naive(lo, hi))
          << "density " << density << " lo " << lo << " hi " << hi;
    }
  }
}

TEST(Stage2BitsTest, RunsOfAtLeastMatchesNaive) {
  std::mt19937_64 rng(2);
  for (int round = 0; round < 3000; ++round) {
    const uint64_t x = rng() | rng();
    for (uint32_t length = 1; length <= 65; ++length) {
      uint64_t naive = 0;
      for (int j = 0; j < 64; ++j) {
        bool all = j + 1 >= static_cast<int>(length);
        for (int i = 0; all && i < static_cast<int>(length); ++i) {
          all = ((x >> (j - i)) & 1) != 0;
        }
        if (all) naive |= uint64_t{1} << j;
      }
      ASSERT_EQ(internal::RunsOfAtLeast(x, length), naive) << length;
    }
  }
}

// A bit source over whole bitmaps of the buffer.
class ArraySource {
 public:
  explicit ArraySource(std::vector<std::vector<uint64_t>> maps)
      : maps_(std::move(maps)) {}
  uint64_t Get(int which, uint64_t pos) const {
    return BitsAt(maps_[which].data(), pos);
  }

 private:
  std::vector<std::vector<uint64_t>> maps_;
};

ArraySource SeqBitmaps(const Bytes& data) {
  const size_t words = data.size() / 64 + 2;
  std::vector<uint64_t> gt(words, 0), lt(words, 0);
  for (size_t p = 1; p < data.size(); ++p) {
    if (data[p] > data[p - 1]) gt[p / 64] |= uint64_t{1} << (p % 64);
    if (data[p] < data[p - 1]) lt[p / 64] |= uint64_t{1} << (p % 64);
  }
  return ArraySource({gt, lt});
}

// Bytes built from steps up, down and level with the given weights.
Bytes Steps(size_t size, uint64_t seed, int up, int down, int level) {
  std::mt19937_64 rng(seed);
  Bytes out(size);
  int value = 128;
  for (size_t i = 0; i < size; ++i) {
    const int r = static_cast<int>(rng() % (up + down + level));
    if (r < up) {
      value += 1 + static_cast<int>(rng() % 3);
    } else if (r < up + down) {
      value -= 1 + static_cast<int>(rng() % 3);
    }
    if (value < 0 || value > 255) value = static_cast<int>(rng() % 256);
    out[i] = static_cast<uint8_t>(value);
  }
  return out;
}

TEST(Stage2SeqCdcTest, WordStateMachineEqualsReferenceCutter) {
  std::vector<Bytes> inputs;
  inputs.push_back(testing::RandomBytes(200000, 3));
  inputs.push_back(testing::TextBytes(200000, 4));
  inputs.push_back(Steps(200000, 5, 1, 1, 1));
  inputs.push_back(Steps(200000, 6, 3, 1, 4));   // long runs with plateaus
  inputs.push_back(Steps(200000, 7, 1, 3, 1));   // mostly opposing
  inputs.push_back(Steps(200000, 8, 5, 1, 20));  // mostly equal bytes
  std::vector<ArraySource> sources;
  for (const Bytes& data : inputs) sources.push_back(SeqBitmaps(data));
  for (uint32_t seq_length :
       {1u, 2u, 3u, 5u, 8u, 13u, 31u, 32u, 33u, 63u, 64u, 65u, 200u}) {
    for (uint32_t trigger : {1u, 2u, 7u, 50u, 64u, 65u, 300u}) {
      for (uint32_t skip : {0u, 1u, 63u, 64u, 512u, 5000u}) {
        for (SeqMode mode : {SeqMode::kIncreasing, SeqMode::kDecreasing}) {
          SeqCdcParams q;
          q.increasing = mode == SeqMode::kIncreasing;
          q.min_size = 64;
          q.max_size = 4000;
          q.seq_length = seq_length;
          q.skip_trigger = trigger;
          q.skip_size = skip;
          const SeqCdcCutter cutter(mode, 64, 4000, seq_length, trigger, skip);
          for (size_t n = 0; n < inputs.size(); ++n) {
            const Bytes& data = inputs[n];
            const ArraySource& source = sources[n];
            // Chunk starts every 9973 bytes, so the word grid moves.
            for (size_t start = 1; start + 10 < data.size(); start += 9973) {
              const size_t avail =
                  std::min<size_t>(data.size() - start, 4000 + start % 5);
              uint64_t hash = 1;
              const size_t expected =
                  cutter.Cut(data.data() + start, avail, start, &hash);
              const Cut got = SelectSeqCdc(q, start, avail, source);
              ASSERT_EQ(got.length, expected)
                  << "input " << n << " start " << start << " L " << seq_length
                  << " T " << trigger << " skip " << skip;
              ASSERT_EQ(got.hash, 0u);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chunkd::chunking::stage2
