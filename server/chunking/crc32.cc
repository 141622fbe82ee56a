#include "chunking/crc32.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunking/kernels/crc32_tables.h"
#include "chunking/limits.h"

namespace chunkd::chunking {
namespace {

// The rolling CRC uses the kernels' tables (crc32_tables.h), the one place
// they are computed: T, the CRC of one byte, and OUT, the CRC of a byte
// followed by a window of zero bytes, which XORed in removes that byte from a
// window that has just grown to 257 bytes.
static_assert(kernels::kCrcWindow == kCrc32WindowSize, "one window size");

constexpr uint32_t UpdateByte(uint32_t crc, uint8_t byte) {
  return kernels::kCrcTables.byte[(crc ^ byte) & 0xFF] ^ (crc >> 8);
}

// Slicing-by-8 tables: t[0] is the byte table T, t[k][b] the effect of byte
// b followed by k zero bytes. The window CRC is recomputed once per chunk
// over 256 bytes; eight bytes per step keep that off stage 2's critical path
// (short chunks, e.g. zeros, cut every min_size bytes).
struct Crc32Slices {
  uint32_t t[8][256] = {};
  constexpr Crc32Slices() {
    for (uint32_t i = 0; i < 256; ++i) t[0][i] = kernels::kCrcTables.byte[i];
    for (int k = 1; k < 8; ++k) {
      for (uint32_t i = 0; i < 256; ++i) {
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
      }
    }
  }
};
constexpr Crc32Slices kCrc32Slices;

// The CRC register after 64 more zero bytes, byte by byte: the register is
// linear in its bits (initial value 0, no final XOR), so with
// CRC(A || B) = Shift(CRC(A), |B|) ^ CRC(B) the 256-byte window splits into
// four 64-byte pieces whose CRCs are independent dependency chains.
struct Crc32Shift64 {
  uint32_t t[4][256] = {};
  constexpr Crc32Shift64() {
    for (int j = 0; j < 4; ++j) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t crc = b << (8 * j);
        for (int step = 0; step < 64; ++step) {
          crc = (crc >> 8) ^ kCrc32Slices.t[0][crc & 0xFF];
        }
        t[j][b] = crc;
      }
    }
  }
  uint32_t operator()(uint32_t crc) const {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^
           t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
  }
};
constexpr Crc32Shift64 kCrc32Shift64;

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;  // x86: little-endian, as the reflected CRC consumes bytes
}

}  // namespace

uint32_t Crc32Update(uint32_t crc, const uint8_t* data, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = UpdateByte(crc, data[i]);
  return crc;
}

uint32_t Crc32Roll(uint32_t crc, uint8_t out, uint8_t in) {
  return UpdateByte(crc, in) ^ kernels::kCrcTables.out[out];
}

uint32_t Crc32WindowAt(const uint8_t* chunk, size_t p, size_t context) {
  // The window is data[p - 255, p], cut where the stream starts.
  const ptrdiff_t lowest = -static_cast<ptrdiff_t>(context);
  const ptrdiff_t first = std::max(
      static_cast<ptrdiff_t>(p) - static_cast<ptrdiff_t>(kCrc32WindowSize - 1),
      lowest);
  const uint8_t* b = chunk + first;
  size_t n = static_cast<size_t>(static_cast<ptrdiff_t>(p) - first + 1);
  const auto& t = kCrc32Slices.t;
  const auto step8 = [&t](uint32_t crc, const uint8_t* at) {
    const uint32_t lo = Load32(at) ^ crc;
    const uint32_t hi = Load32(at + 4);
    return t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^
           t[4][lo >> 24] ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^
           t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  };
  if (n == kCrc32WindowSize) {
    // The whole window (every chunk but those near the stream's start):
    // four interleaved chains of 64 bytes, joined by Shift64.
    static_assert(kCrc32WindowSize == 4 * 64, "four pieces of 64 bytes");
    uint32_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    for (size_t i = 0; i < 64; i += 8) {
      c0 = step8(c0, b + i);
      c1 = step8(c1, b + 64 + i);
      c2 = step8(c2, b + 128 + i);
      c3 = step8(c3, b + 192 + i);
    }
    return kCrc32Shift64(kCrc32Shift64(kCrc32Shift64(c0) ^ c1) ^ c2) ^ c3;
  }
  uint32_t crc = 0;
  for (; n >= 8; n -= 8, b += 8) crc = step8(crc, b);
  return Crc32Update(crc, b, n);
}

Crc32Cutter::Crc32Cutter(uint32_t min_size, uint32_t avg_size,
                         uint32_t max_size)
    : min_size_(min_size), max_size_(max_size), mask_(avg_size - 1) {}

size_t Crc32Cutter::Cut(const uint8_t* chunk_start, size_t avail,
                        size_t context, uint64_t* hash) const {
  *hash = 0;
  if (avail < min_size_) return avail;
  const size_t limit = std::min(avail, max_size_);
  // Positions are relative to chunk_start and may be negative down to
  // -context. The first candidate is the chunk's min_size-th byte.
  const ptrdiff_t window = kCrc32WindowSize;
  const ptrdiff_t lowest = -static_cast<ptrdiff_t>(context);
  ptrdiff_t p = static_cast<ptrdiff_t>(min_size_) - 1;
  // A context shorter than the window means the stream starts there.
  const ptrdiff_t first = std::max(p - (window - 1), lowest);
  uint32_t crc =
      Crc32Update(0, chunk_start + first, static_cast<size_t>(p - first + 1));
  while (true) {
    if ((crc & mask_) == 0) {
      *hash = crc;
      return static_cast<size_t>(p) + 1;
    }
    ++p;
    if (p >= static_cast<ptrdiff_t>(limit)) break;
    const ptrdiff_t out = p - window;  // the byte leaving a full window
    crc = out >= lowest ? Crc32Roll(crc, chunk_start[out], chunk_start[p])
                        : UpdateByte(crc, chunk_start[p]);
  }
  return limit;
}

}  // namespace chunkd::chunking
