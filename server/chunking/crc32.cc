#include "chunking/crc32.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "chunking/limits.h"

namespace chunkd::chunking {
namespace {

constexpr uint32_t kPolynomial = 0xEDB88320;

constexpr std::array<uint32_t, 256> MakeByteTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ kPolynomial : crc >> 1;
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kByteTable = MakeByteTable();

constexpr uint32_t UpdateByte(uint32_t crc, uint8_t byte) {
  return kByteTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
}

// kOutTable[b]: the contribution of byte b to the CRC once kCrc32WindowSize
// more bytes have followed it, i.e. CRC(b, 0 x kCrc32WindowSize). XORing it
// out removes b from a window that has just grown to 257 bytes.
constexpr std::array<uint32_t, 256> MakeOutTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = UpdateByte(0, static_cast<uint8_t>(b));
    for (uint32_t i = 0; i < kCrc32WindowSize; ++i) crc = UpdateByte(crc, 0);
    table[b] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kOutTable = MakeOutTable();

}  // namespace

uint32_t Crc32Update(uint32_t crc, const uint8_t* data, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = UpdateByte(crc, data[i]);
  return crc;
}

uint32_t Crc32Roll(uint32_t crc, uint8_t out, uint8_t in) {
  return UpdateByte(crc, in) ^ kOutTable[out];
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
