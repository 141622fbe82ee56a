#include "chunking/bit_sources.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "chunking/kernels/kernels.h"
#include "chunking/strategies/strategy.h"

namespace chunkd::chunking {

BlockSource::BlockSource(const BitmapStrategy& strategy,
                         const kernels::Kernel& kernel, ScanBlock* block,
                         const uint8_t* data, uint64_t offset, size_t size,
                         uint64_t hard_end)
    : strategy_(strategy),
      kernel_(kernel),
      block_(*block),
      data_(data),
      offset_(offset),
      size_(size),
      hard_end_(hard_end),
      next_(strategy.block_sizes().first) {}

void BlockSource::Refill(uint64_t pos) {
  const BlockSizes& sizes = strategy_.block_sizes();
  // A scan that jumped past the block starts over with short blocks; one
  // that ran off its end continues with longer ones.
  if (pos > block_.end + 64) next_ = sizes.first;
  const uint64_t end = std::min(hard_end_, pos + next_);
  next_ = next_ == sizes.first ? sizes.then : std::min(2 * next_, kMaxBlock);
  const size_t words = kernels::BitmapWords(static_cast<size_t>(end - pos));
  // The block's bytes and what follows, fetched from memory before the
  // kernel reads them: the scan jumps (min_size at every chunk, SeqCDC's
  // SkipSize) where the hardware prefetcher cannot follow, and a kernel's
  // lanes start mid-block. On data from DRAM this doubles the throughput
  // of the sequential scan; on cached data it costs a few instructions.
  const uint64_t fetch_end = std::min(offset_ + size_, end + sizes.prefetch);
  for (uint64_t at = pos; at < fetch_end; at += 64) {
    __builtin_prefetch(data_ + (at - offset_));
  }
  uint64_t* out0 = block_.bits[0].data();
  uint64_t* out1 = strategy_.bitmaps() > 1 ? block_.bits[1].data() : nullptr;
  strategy_.Stage1(kernel_, data_, static_cast<size_t>(pos - offset_),
                   static_cast<size_t>(end - offset_), out0, out1);
  // The padding word read by unaligned BitsAt at the block's end.
  out0[words] = 0;
  if (out1 != nullptr) out1[words] = 0;
  block_.begin = pos;
  block_.end = end;
}

}  // namespace chunkd::chunking
