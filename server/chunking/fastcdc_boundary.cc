#include "chunking/fastcdc_boundary.h"

#include <algorithm>

#include "chunking/fastcdc.h"

namespace chunkd::chunking {

FastCdcBoundary::FastCdcBoundary(const ChunkerOptions& o)
    : min_size_(o.min_size), avg_size_(o.avg_size), max_size_(o.max_size) {
  const uint32_t bits = FastCdcLog2Round(o.avg_size);
  mask_s_ = kFastCdcMasks[bits + o.normalization_level];
  mask_l_ = kFastCdcMasks[bits - o.normalization_level];
  const auto& gear = FastCdcGearTable();
  for (size_t i = 0; i < 256; ++i) gear_[i] = gear[i] ^ o.seed;
}

size_t FastCdcBoundary::Needed(size_t size) const {
  // A hash cut at `size` needs byte `size`, and a stream that ended right
  // after it would not test that position when size + 1 is odd: one more.
  return size >= max_size_ ? max_size_ : size + 2;
}

bool FastCdcBoundary::Holds(const uint8_t* chunk, size_t avail, bool at_end,
                            size_t size) const {
  if (size == 0 || size > max_size_ || size > avail) return false;
  if (at_end && size == avail) return true;  // the stream ends there
  if (size == max_size_) return true;        // the largest chunk
  // Positions FastCDC tests: from min rounded down to even, below the largest
  // even number <= min(remaining, max).
  const size_t first = min_size_ & ~size_t{1};
  const size_t remaining = std::min<size_t>(avail, max_size_);
  if (size < first) return false;
  if (at_end) {
    if (size >= (remaining & ~size_t{1})) return false;
  } else {
    if (avail < Needed(size)) return false;
    if (size >= (max_size_ & ~size_t{1})) return false;
  }
  // The rolling hash at `size`: 64 bytes of window, restarted at `first`.
  uint64_t h = 0;
  for (size_t i = std::max(first, size >= 63 ? size - 63 : 0); i <= size; ++i) {
    h = (h << 1) + gear_[chunk[i]];
  }
  const uint64_t mask = size < (avg_size_ & ~uint32_t{1}) ? mask_s_ : mask_l_;
  return (h & mask) == 0;
}

}  // namespace chunkd::chunking
