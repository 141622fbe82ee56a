#include "chunking/seqcdc.h"

#include <cstddef>
#include <cstdint>

namespace chunkd::chunking {

SeqCdcCutter::SeqCdcCutter(SeqMode mode, uint32_t min_size, uint32_t max_size,
                           uint32_t seq_length, uint32_t skip_trigger,
                           uint32_t skip_size)
    : increasing_(mode != SeqMode::kDecreasing),
      min_size_(min_size),
      max_size_(max_size),
      seq_length_(seq_length),
      skip_trigger_(skip_trigger),
      skip_size_(skip_size) {}

size_t SeqCdcCutter::Cut(const uint8_t* chunk_start, size_t avail,
                         size_t /*context*/, uint64_t* hash) const {
  const uint8_t* const buff = chunk_start;
  *hash = 0;
  size_t size = avail;
  if (size < min_size_) return size;
  if (size > max_size_) size = max_size_;

  size_t pos = min_size_;
  uint32_t opposing = 0;
  uint32_t run = 0;
  while (pos < size) {
    const int step = static_cast<int>(buff[pos]) - buff[pos - 1];
    ++pos;
    if (step == 0) continue;  // equal bytes are absorbed
    const bool opposes = increasing_ ? step < 0 : step > 0;
    if (opposes) {
      ++opposing;
      run = 0;
    } else {
      ++run;
    }
    if (run == seq_length_) return pos - 1;
    if (opposing == skip_trigger_) {
      pos += skip_size_;
      opposing = 0;
    }
  }
  return size;
}

}  // namespace chunkd::chunking
