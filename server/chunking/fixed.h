// fixed: fixed-size chunks, the baseline every deduplication paper compares
// against. Every chunk but the last is exactly `size` bytes; min_size and
// max_size are not used.
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_FIXED_H_
#define CHUNKD_CHUNKING_FIXED_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "chunking/cutter.h"

namespace chunkd::chunking {

// Cuts every chunk `size` bytes long but the last. Thread safety: immutable;
// Cut may run on any number of threads. No default size.
class FixedCutter final : public Cutter {
 public:
  // REQUIRES: size >= 1.
  explicit FixedCutter(uint32_t size) : size_(size) {}

  // *hash is always 0.
  size_t Cut(const uint8_t* /*chunk_start*/, size_t avail, size_t /*context*/,
             uint64_t* hash) const override {
    *hash = 0;
    return std::min(avail, size_);
  }
  size_t max_size() const override { return size_; }

 private:
  size_t size_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_FIXED_H_
