// The scalar kernels: the definitions of functions.h, one position after the
// other. They are the reference of the differential tests, so they stay the
// plain rolling loops of the definitions — clear first, fast second (bits
// are collected a word at a time in registers).

#include <cstddef>
#include <cstdint>

#include "chunking/kernels/backends.h"
#include "chunking/kernels/crc32_tables.h"

namespace chunkd::chunking::kernels::scalar {
namespace {

// Calls bits(p, &a, &b) for p in [begin, end) and stores the two bits it
// returns into whole words of out_a and out_b (the last one zero-padded).
template <class Bits>
void ForEachWord(size_t begin, size_t end, uint64_t* out_a, uint64_t* out_b,
                 Bits bits) {
  size_t p = begin;
  while (p < end) {
    const size_t stop = end - p < 64 ? end : p + 64;
    uint64_t wa = 0, wb = 0;
    for (unsigned bit = 0; p < stop; ++p, ++bit) {
      bool a = false, b = false;
      bits(p, &a, &b);
      wa |= uint64_t{a} << bit;
      wb |= uint64_t{b} << bit;
    }
    *out_a++ = wa;
    if (out_b != nullptr) *out_b++ = wb;
  }
}

}  // namespace

void FastCdc(const uint8_t* data, size_t begin, size_t end,
             const GearParams& params, uint64_t* hits_s, uint64_t* hits_l) {
  const uint64_t* const gear = params.gear;
  // Rolling `h = (h << 1) + gear[byte]` from 63 bytes before `begin` (or from
  // data[0]) gives exactly W(p): the byte 64 back is shifted out of 64 bits.
  uint64_t h = 0;
  for (size_t q = begin >= 63 ? begin - 63 : 0; q < begin; ++q) {
    h = (h << 1) + gear[data[q]];
  }
  ForEachWord(begin, end, hits_s, hits_l, [&](size_t p, bool* s, bool* l) {
    h = (h << 1) + gear[data[p]];
    *s = (h & params.mask_s) == 0;
    *l = (h & params.mask_l) == 0;
  });
}

void Crc32(const uint8_t* data, size_t begin, size_t end, uint32_t mask,
           uint64_t* hits) {
  const CrcTables& t = kCrcTables;
  // crc = CRC of the window ending just before `begin`, at most 255 bytes, so
  // that adding data[begin] makes it the full window of `begin`.
  uint32_t crc = 0;
  for (size_t q = begin >= kCrcWindow - 1 ? begin - (kCrcWindow - 1) : 0;
       q < begin; ++q) {
    crc = t.byte[(crc ^ data[q]) & 0xFF] ^ (crc >> 8);
  }
  ForEachWord(begin, end, hits, nullptr, [&](size_t p, bool* hit, bool*) {
    crc = t.byte[(crc ^ data[p]) & 0xFF] ^ (crc >> 8);
    // From the second step on the window held 256 bytes: drop the oldest.
    if (p > begin && p >= kCrcWindow) crc ^= t.out[data[p - kCrcWindow]];
    *hit = (crc & mask) == 0;
  });
}

void SeqCdc(const uint8_t* data, size_t begin, size_t end, uint64_t* gt,
            uint64_t* lt) {
  ForEachWord(begin, end, gt, lt, [&](size_t p, bool* g, bool* l) {
    *g = p > 0 && data[p] > data[p - 1];
    *l = p > 0 && data[p] < data[p - 1];
  });
}

// What the CPU and OS must offer before this unit's code runs (backends.h).
const uint32_t kRequiredFeatures = kCompiledFeatures;

}  // namespace chunkd::chunking::kernels::scalar
