// FastCdcBoundary: FastCDC's boundary condition at one given position, the
// rolling-window test (RWT) of RapidCDC (pipeline/rapid_cdc.h).
//
// FastCDC (fastcdc.h) decides where a chunk that starts at p ends by scanning
// from p + min; whether it may end at exactly p + s depends only on the bytes
// p + min .. p + s (the Gear hash restarts at min and its mask bits see at
// most 64 bytes), on max_size, and on where the stream ends. This class
// answers that for one suggested s without scanning the bytes before it:
// the condition holds at byte s (and FastCDC tests that position), or s is
// max_size, or the stream ends at s. It does not say that no earlier position
// ends the chunk; RapidCDC's FPT test establishes that.
//
// Near the stream's end FastCDC tests only the positions below the largest
// even number <= min(remaining, max), so a hash cut is accepted only when that
// bound is known to lie beyond s (Needed()).
//
// Thread safety: immutable after construction; Holds() may be called from any
// number of threads.
#ifndef CHUNKD_CHUNKING_FASTCDC_BOUNDARY_H_
#define CHUNKD_CHUNKING_FASTCDC_BOUNDARY_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "chunkd/chunker.h"

namespace chunkd::chunking {

class FastCdcBoundary {
 public:
  // REQUIRES: options are valid fastcdc options with defaults resolved.
  explicit FastCdcBoundary(const ChunkerOptions& options);

  // `chunk` holds `avail` bytes from a chunk start; `at_end` when the stream
  // ends after them. True when the reference, cutting from that start, may
  // end the chunk at exactly `size` bytes: the boundary condition holds at
  // byte `size` (and FastCDC tests that position), or size is max_size, or
  // the stream ends at `size`. False also when more bytes are needed to know
  // (Needed() says how many).
  bool Holds(const uint8_t* chunk, size_t avail, bool at_end,
             size_t size) const;

  // Bytes from the chunk start Holds() needs to decide on `size` before the
  // stream end is known.
  size_t Needed(size_t size) const;

  uint32_t max_size() const { return max_size_; }

 private:
  uint32_t min_size_;
  uint32_t avg_size_;
  uint32_t max_size_;
  uint64_t mask_s_;
  uint64_t mask_l_;
  std::array<uint64_t, 256> gear_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_FASTCDC_BOUNDARY_H_
