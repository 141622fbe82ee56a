// The two bit sources the engine hands to stage 2's selectors (stage2.h): the
// ring of bitmaps the two-stage strategy computes ahead, and the blocks the
// sequential scan computes on demand. An algorithm's strategy
// (strategies/strategy.h) runs its selector on either.
#ifndef CHUNKD_CHUNKING_BIT_SOURCES_H_
#define CHUNKD_CHUNKING_BIT_SOURCES_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunking/kernels/kernels.h"
#include "chunking/stage2.h"

namespace chunkd::chunking {

class BitmapStrategy;  // strategies/strategy.h

// Stage-1 bitmaps per position at most: stage2::kFirst and kSecond.
inline constexpr int kMaxBitmaps = 2;

// The longest block the sequential scan computes (its scratch bitmaps are
// sized for it).
inline constexpr size_t kMaxBlock = size_t{64} << 10;

// The two-stage strategy's source: a view of the engine's ring of bitmap
// words, in which position origin + 64 g + b is bit b of word g & mask.
//
// Thread safety: reads only; valid while the engine's ring is neither grown
// nor rewritten under the positions stage 2 reads.
class WindowSource {
 public:
  // words[k]: bitmap k's ring (unused entries may be null).
  WindowSource(uint64_t origin, uint64_t mask,
               const std::array<const uint64_t*, kMaxBitmaps>& words)
      : origin_(origin), mask_(mask), words_(words) {}

  uint64_t Get(int which, uint64_t pos) const {
    const uint64_t rel = pos - origin_;
    const uint64_t g = rel / 64;
    const unsigned b = static_cast<unsigned>(rel % 64);
    const uint64_t* w = words_[which];
    const uint64_t lo = w[g & mask_];
    if (b == 0) return lo;
    return (lo >> b) | (w[(g + 1) & mask_] << (64 - b));
  }

  uint64_t FindFirst(int which, uint64_t lo, uint64_t hi) const {
    return stage2::FindFirstInWords(words_[which], mask_, origin_, lo, hi);
  }

 private:
  const uint64_t origin_;
  const uint64_t mask_;
  const std::array<const uint64_t*, kMaxBitmaps> words_;
};

// The sequential scan's current block: the bitmaps of stream positions
// [begin, end), kept from one chunk to the next. Empty while begin > end.
// Default: empty, no scratch (the engine sizes `bits` for kMaxBlock).
struct ScanBlock {
  std::array<std::vector<uint64_t>, kMaxBitmaps> bits;
  uint64_t begin = 1;
  uint64_t end = 0;
};

// The sequential strategy's source: a block computed where the selector
// asks, growing while the chunk goes on. The block outlives the chunk: when
// the next chunk's scan starts inside it — short chunks, e.g. crc32 on zeros
// — it is used again instead of paying another kernel call.
//
// Thread safety: not thread-safe; it writes the engine's ScanBlock.
class BlockSource {
 public:
  // The input is data[0, size), stream positions [offset, offset + size);
  // the chunk's bits are never needed at or past hard_end.
  BlockSource(const BitmapStrategy& strategy, const kernels::Kernel& kernel,
              ScanBlock* block, const uint8_t* data, uint64_t offset,
              size_t size, uint64_t hard_end);

  uint64_t Get(int which, uint64_t pos) {
    // Bits past the chunk's hard end are never looked at.
    const uint64_t need = std::min(pos + 64, hard_end_);
    if (pos < block_.begin || need > block_.end) Refill(pos);
    return stage2::BitsAt(block_.bits[which].data(),
                          static_cast<size_t>(pos - block_.begin));
  }

 private:
  // Computes the block that starts at `pos`.
  void Refill(uint64_t pos);

  const BitmapStrategy& strategy_;
  const kernels::Kernel& kernel_;
  ScanBlock& block_;
  const uint8_t* const data_;
  const uint64_t offset_;
  const size_t size_;
  const uint64_t hard_end_;
  size_t next_;  // the length of the next block
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_BIT_SOURCES_H_
