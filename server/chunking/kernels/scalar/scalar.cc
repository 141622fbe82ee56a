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

// rabin: scalar body (definition in functions.h).
void Rabin(const uint8_t* data, size_t begin, size_t end,
           const RabinParams& params, uint64_t* hits) {
  // restic's slide: remove the leaving byte (out), append the new one and
  // reduce the top byte (mod, shifted out above bit 53 - 8 = 45).
  constexpr int kShift = 45;
  constexpr size_t kWindow = 64;
  auto slide = [&params](uint64_t d, uint8_t leaving, uint8_t in) {
    d ^= params.out[leaving];
    return ((d << 8) | in) ^ params.mod[d >> kShift];
  };
  // The window starts all zero at `warm` (or data[0]): out[0] == 0, so its
  // first 64 slides remove nothing, and from there D(p) holds exactly the
  // 64 bytes ending at p.
  const size_t warm = begin >= kWindow - 1 ? begin - (kWindow - 1) : 0;
  uint64_t d = 0;
  for (size_t q = warm; q < begin; ++q) d = slide(d, 0, data[q]);
  ForEachWord(begin, end, hits, nullptr, [&](size_t p, bool* hit, bool*) {
    d = slide(d, p >= warm + kWindow ? data[p - kWindow] : 0, data[p]);
    *hit = (d & params.mask) == 0;
  });
}
// end rabin

// buzhash: scalar body (definition in functions.h).
void Buzhash(const uint8_t* data, size_t begin, size_t end,
             const BuzhashParams& params, uint64_t* hits) {
  const uint32_t* const table = params.table;
  const uint32_t d = params.discriminator;
  auto rotl = [](uint32_t x, unsigned n) {
    return n % 32 == 0 ? x : (x << n % 32) | (x >> (32 - n % 32));
  };
  // h = H(begin - 1) over its full window (48 bytes, fewer near data[0]), so
  // that the first step below can drop the byte 48 back like every other.
  uint32_t h = 0;
  for (size_t q = begin >= 48 ? begin - 48 : 0; q < begin; ++q) {
    h = rotl(h, 1) ^ table[data[q]];
  }
  ForEachWord(begin, end, hits, nullptr, [&](size_t p, bool* hit, bool*) {
    h = rotl(h, 1) ^ table[data[p]];
    if (p >= 48) h ^= rotl(table[data[p - 48]], 48);
    *hit = h % d == d - 1;
  });
}
// end buzhash

// repmaxcdc: scalar body (definition in functions.h).
void RepMaxCdc(const uint8_t* data, size_t begin, size_t end,
               const uint64_t* gear, uint64_t* max) {
  // W(begin - 1) from up to 63 bytes, as in FastCdc above.
  uint64_t h = 0;
  for (size_t q = begin >= 63 ? begin - 63 : 0; q < begin; ++q) {
    h = (h << 1) + gear[data[q]];
  }
  for (size_t group = begin; group < end; group += 64) {
    const size_t stop = end - group < 64 ? end : group + 64;
    uint64_t best = 0;
    for (size_t p = group; p < stop; ++p) {
      h = (h << 1) + gear[data[p]];
      if (h > best) best = h;
    }
    *max++ = best;
  }
}
// end repmaxcdc

// What the CPU and OS must offer before this unit's code runs (backends.h).
const uint32_t kRequiredFeatures = kCompiledFeatures;

}  // namespace chunkd::chunking::kernels::scalar
