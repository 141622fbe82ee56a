// crc32: content-defined chunking with a rolling CRC-32, as in SS-CDC.
//
// Paper: F. Ni, X. Lin, S. Jiang, "SS-CDC: A Two-stage Parallel
// Content-Defined Chunking for Deduplicating Backup Storage", SYSTOR 2019.
//
// Definition (docs/design.md, "crc32: rolling CRC-32"): hash(p) is the CRC-32 (reflected polynomial
// 0xEDB88320, initial value 0, no final XOR) of the 256-byte window ending at
// stream position p — of all bytes [0, p] while p < 255. Position p is a
// candidate when (hash(p) & (avg_size - 1)) == 0. A chunk starting at s ends
// after the first candidate p with p - s + 1 >= min_size; without one by
// s + max_size it is max_size long; the end of the stream closes it.
//
// The window is stream-global: it is not restarted per chunk, so a chunk's
// first min_size - 1 bytes (and up to 255 bytes before the chunk, when
// min_size < 256) still feed the hash of its first candidates.
//
// Rolling: with initial value 0 and no final XOR the CRC is linear and leading
// zero bytes do not change it, so sliding the window by one byte is
//   crc' = Update(crc, in) ^ kOut[out],
// where kOut[b] = CRC(b followed by 256 zero bytes).
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_CRC32_H_
#define CHUNKD_CHUNKING_CRC32_H_

#include <cstddef>
#include <cstdint>

#include "chunking/cutter.h"

namespace chunkd::chunking {

// CRC-32 register update over `n` bytes, reflected polynomial 0xEDB88320,
// without any initial or final inversion (pass crc = 0 to start).
uint32_t Crc32Update(uint32_t crc, const uint8_t* data, size_t n);

// One rolling step: the CRC of the window that drops `out` and takes `in`,
// given the CRC of a full kCrc32WindowSize-byte window.
uint32_t Crc32Roll(uint32_t crc, uint8_t out, uint8_t in);

// hash(p) of the definition above at chunk[p], computed directly (slicing by
// eight, four interleaved 64-byte pieces) rather than rolled: the hash stage
// 2 reports for a chunk cut at p. `context` readable bytes precede chunk;
// fewer than kCrc32WindowSize - 1 only where the stream starts.
uint32_t Crc32WindowAt(const uint8_t* chunk, size_t p, size_t context);

// The crc32 cut function of the definition above, rolling the window CRC
// byte by byte. Thread safety: immutable; Cut may run on any number of
// threads. No defaults: the parameters are the validated options'.
class Crc32Cutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions (avg a power of two,
  // 1 <= min <= max).
  Crc32Cutter(uint32_t min_size, uint32_t avg_size, uint32_t max_size);

  // Reads up to 255 bytes before chunk_start (see Cutter::Cut). *hash is the
  // window CRC at the chunk's last byte when the chunk ends at a candidate,
  // else 0.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  size_t max_size() const override { return max_size_; }

 private:
  size_t min_size_;
  size_t max_size_;
  uint32_t mask_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_CRC32_H_
