// buzhash: casync's chunker as Go module github.com/folbricht/desync v1.0.4
// implements it, byte-exact. Definition: docs/algorithms/buzhash.md.
//
// The hash of a 48-byte window w_0 ... w_47 (w_47 the newest byte) is
//   H = XOR over i in [0, 47] of rotl32(table[w_(47 - i)], i)
// with casync's table. It rolls byte by byte: rotating H left by one ages
// every term, rotl32(table[out], 48) cancels the byte that left, table[in]
// adds the new one. So H at a position is a function of the 48 bytes ending
// there alone.
//
// A chunk: when at most min_size bytes remain, they are the last chunk.
// Otherwise the window is filled with the 48 bytes before offset min_size
// and every byte from offset min_size on is rolled in; the chunk ends after
// the first byte at which H % d == d - 1 (d: BuzhashDiscriminator(avg_size)),
// else at max_size, else at the end of the stream. (desync tests the bytes
// two at a time and skips the last one of an odd count; a hit there would
// end the chunk where the limit does, so the lengths are the same.)
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_BUZHASH_H_
#define CHUNKD_CHUNKING_BUZHASH_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "chunking/cutter.h"

namespace chunkd::chunking {

// casync's 256-entry buzhash table.
const std::array<uint32_t, 256>& BuzhashTable();

// desync's discriminator d for an average size: a position is a cut
// candidate when hash % d == d - 1. REQUIRES: avg_size within the limits of
// buzhash (limits.h), where d >= 1.
uint32_t BuzhashDiscriminator(uint32_t avg_size);

// H of the 48 bytes ending at `last` (last[-47] .. last[0]).
uint32_t BuzhashWindow(const uint8_t* last);

// The buzhash cut function. Thread safety: immutable; Cut may run on any
// number of threads. No defaults: the parameters are the validated options'.
class BuzhashCutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions.
  BuzhashCutter(uint32_t min_size, uint32_t avg_size, uint32_t max_size);

  // `context` is unused: the window restarts at every chunk. *hash is H at
  // the chunk's last byte when that byte is a candidate (offset >= min_size
  // and H % d == d - 1), else 0 — the chunk then ended at max_size or at the
  // end of the stream.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  size_t max_size() const override { return max_size_; }

  uint32_t discriminator() const { return discriminator_; }

 private:
  size_t min_size_;
  size_t max_size_;
  uint32_t discriminator_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_BUZHASH_H_
