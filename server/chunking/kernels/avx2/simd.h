// AVX2 primitives of the generic kernel bodies (see generic/README.md): 32
// lanes of one byte per ymm register. Include only from avx2/avx2.cc, the one
// translation unit compiled with the AVX2 flags.
//
// Without GFNI the CRC's byte maps are two 16-entry vpshufb lookups, one per
// nibble; without mask registers candidate lanes come from vpmovmskb.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CHUNKING_KERNELS_AVX2_SIMD_H_
#define CHUNKD_CHUNKING_KERNELS_AVX2_SIMD_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunking/kernels/crc32_tables.h"
#include "chunking/kernels/intrinsics.h"

namespace chunkd::chunking::kernels::avx2 {

#include "chunking/kernels/generic/common.h"

using Vec = __m256i;

inline void PrefetchLine(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

inline Vec VZero() { return _mm256_setzero_si256(); }

// ---------------------------------------------------------------- seqcdc --

inline void GtLt64(const uint8_t* cur, uint64_t* gt, uint64_t* lt) {
  uint64_t g = 0, l = 0;
  for (int h = 0; h < 2; ++h) {
    const Vec a =
        _mm256_loadu_si256(reinterpret_cast<const Vec*>(cur + 32 * h));
    const Vec b =
        _mm256_loadu_si256(reinterpret_cast<const Vec*>(cur + 32 * h - 1));
    const Vec m = _mm256_max_epu8(a, b);
    // a > b exactly when max(a, b) != b; a < b when max(a, b) != a.
    const uint32_t not_gt =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(m, b)));
    const uint32_t not_lt =
        static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(m, a)));
    g |= static_cast<uint64_t>(~not_gt) << (32 * h);
    l |= static_cast<uint64_t>(~not_lt) << (32 * h);
  }
  *gt = g;
  *lt = l;
}

// ----------------------------------------------------------------- crc32 --

inline constexpr size_t kCrcLanes = 32;
using CrcLaneBits = uint32_t;

// The constants of one Crc32Lanes call, as vectors (MakeCrcConsts). A plain
// value on the caller's stack; no defaults.
struct CrcConsts {
  Vec byte_lo[4], byte_hi[4];  // byte j of T[n], T[n << 4]
  Vec out_lo[4], out_hi[4];    // byte j of OUT[n], OUT[n << 4]
  Vec mask[4];                 // byte j of the candidate mask
  Vec nibble;                  // 0x0f in every byte
};

inline Vec Broadcast16(const uint8_t (&table)[16]) {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
}

inline CrcConsts MakeCrcConsts(uint32_t mask) {
  CrcConsts c;
  for (int j = 0; j < 4; ++j) {
    c.byte_lo[j] = Broadcast16(kCrcTables.byte_lo[j]);
    c.byte_hi[j] = Broadcast16(kCrcTables.byte_hi[j]);
    c.out_lo[j] = Broadcast16(kCrcTables.out_lo[j]);
    c.out_hi[j] = Broadcast16(kCrcTables.out_hi[j]);
    c.mask[j] = _mm256_set1_epi8(static_cast<char>(mask >> (8 * j)));
  }
  c.nibble = _mm256_set1_epi8(0x0f);
  return c;
}

// The linear byte map given by its two nibble tables.
inline Vec NibbleMap(Vec lo_nibbles, Vec hi_nibbles, Vec lo_table,
                     Vec hi_table) {
  return _mm256_xor_si256(_mm256_shuffle_epi8(lo_table, lo_nibbles),
                          _mm256_shuffle_epi8(hi_table, hi_nibbles));
}

inline void SplitNibbles(const CrcConsts& c, Vec x, Vec* lo, Vec* hi) {
  *lo = _mm256_and_si256(x, c.nibble);
  *hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), c.nibble);
}

inline Vec Xor3(Vec a, Vec b, Vec c) {
  return _mm256_xor_si256(_mm256_xor_si256(a, b), c);
}

inline void CrcWarmBlock(const CrcConsts& c, Vec state[4], const Vec* in) {
  Vec s0 = state[0], s1 = state[1], s2 = state[2], s3 = state[3];
  for (size_t t = 0; t < kCrcLanes; ++t) {
    Vec xl, xh;
    SplitNibbles(c, _mm256_xor_si256(s0, in[t]), &xl, &xh);
    s0 = _mm256_xor_si256(NibbleMap(xl, xh, c.byte_lo[0], c.byte_hi[0]), s1);
    s1 = _mm256_xor_si256(NibbleMap(xl, xh, c.byte_lo[1], c.byte_hi[1]), s2);
    s2 = _mm256_xor_si256(NibbleMap(xl, xh, c.byte_lo[2], c.byte_hi[2]), s3);
    s3 = NibbleMap(xl, xh, c.byte_lo[3], c.byte_hi[3]);
  }
  state[0] = s0;
  state[1] = s1;
  state[2] = s2;
  state[3] = s3;
}

template <int kPlanes>
inline void CrcRollBlock(const CrcConsts& c, Vec state[4], const Vec* in,
                         const Vec* out, CrcLaneBits* hits) {
  Vec s0 = state[0], s1 = state[1], s2 = state[2], s3 = state[3];
  const Vec zero = _mm256_setzero_si256();
  for (size_t t = 0; t < kCrcLanes; ++t) {
    Vec xl, xh, ol, oh;
    SplitNibbles(c, _mm256_xor_si256(s0, in[t]), &xl, &xh);
    SplitNibbles(c, out[t], &ol, &oh);
    s0 = Xor3(NibbleMap(xl, xh, c.byte_lo[0], c.byte_hi[0]), s1,
              NibbleMap(ol, oh, c.out_lo[0], c.out_hi[0]));
    s1 = Xor3(NibbleMap(xl, xh, c.byte_lo[1], c.byte_hi[1]), s2,
              NibbleMap(ol, oh, c.out_lo[1], c.out_hi[1]));
    s2 = Xor3(NibbleMap(xl, xh, c.byte_lo[2], c.byte_hi[2]), s3,
              NibbleMap(ol, oh, c.out_lo[2], c.out_hi[2]));
    s3 = _mm256_xor_si256(NibbleMap(xl, xh, c.byte_lo[3], c.byte_hi[3]),
                          NibbleMap(ol, oh, c.out_lo[3], c.out_hi[3]));
    if (kPlanes == 0) {
      hits[t] = ~CrcLaneBits{0};
      continue;
    }
    Vec acc = _mm256_and_si256(s0, c.mask[0]);
    if (kPlanes >= 2)
      acc = _mm256_or_si256(acc, _mm256_and_si256(s1, c.mask[1]));
    if (kPlanes >= 3)
      acc = _mm256_or_si256(acc, _mm256_and_si256(s2, c.mask[2]));
    if (kPlanes >= 4)
      acc = _mm256_or_si256(acc, _mm256_and_si256(s3, c.mask[3]));
    hits[t] = static_cast<CrcLaneBits>(
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(acc, zero)));
  }
  state[0] = s0;
  state[1] = s1;
  state[2] = s2;
  state[3] = s3;
}

// rows[l] (32 bytes each) -> out[t], byte l of which is rows[l][t].
inline void CrcTransposeRows(const uint8_t* const* rows, Vec* out,
                             Vec* scratch) {
  // Pass 1, 8 rows at a time: three rounds of unpacks leave c[k] holding,
  // per 128-bit half h, the 8 rows' bytes of steps 16h + 2k and 16h + 2k + 1.
  for (int g = 0; g < 4; ++g) {
    Vec r[8];
    for (int i = 0; i < 8; ++i) {
      r[i] = _mm256_loadu_si256(reinterpret_cast<const Vec*>(rows[8 * g + i]));
    }
    Vec a[8], b[8];
    for (int i = 0; i < 4; ++i) {
      a[2 * i] = _mm256_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
      a[2 * i + 1] = _mm256_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    b[0] = _mm256_unpacklo_epi16(a[0], a[2]);
    b[1] = _mm256_unpackhi_epi16(a[0], a[2]);
    b[2] = _mm256_unpacklo_epi16(a[1], a[3]);
    b[3] = _mm256_unpackhi_epi16(a[1], a[3]);
    b[4] = _mm256_unpacklo_epi16(a[4], a[6]);
    b[5] = _mm256_unpackhi_epi16(a[4], a[6]);
    b[6] = _mm256_unpacklo_epi16(a[5], a[7]);
    b[7] = _mm256_unpackhi_epi16(a[5], a[7]);
    for (int i = 0; i < 4; ++i) {
      scratch[8 * g + 2 * i] = _mm256_unpacklo_epi32(b[i], b[i + 4]);
      scratch[8 * g + 2 * i + 1] = _mm256_unpackhi_epi32(b[i], b[i + 4]);
    }
  }
  // Pass 2: a 4x4 transpose of qwords over the four groups per k.
  for (int k = 0; k < 8; ++k) {
    const Vec c0 = scratch[k], c1 = scratch[8 + k];
    const Vec c2 = scratch[16 + k], c3 = scratch[24 + k];
    const Vec t0 = _mm256_unpacklo_epi64(c0, c1);
    const Vec t1 = _mm256_unpackhi_epi64(c0, c1);
    const Vec t2 = _mm256_unpacklo_epi64(c2, c3);
    const Vec t3 = _mm256_unpackhi_epi64(c2, c3);
    out[2 * k] = _mm256_permute2x128_si256(t0, t2, 0x20);
    out[2 * k + 1] = _mm256_permute2x128_si256(t1, t3, 0x20);
    out[16 + 2 * k] = _mm256_permute2x128_si256(t0, t2, 0x31);
    out[17 + 2 * k] = _mm256_permute2x128_si256(t1, t3, 0x31);
  }
}

// hits[t] (bit l: lane l at step t) -> lane_bits[l] (bit t).
inline void CrcTransposeHits(const CrcLaneBits* hits, CrcLaneBits* lane_bits) {
  // Per 128-bit half, group the bytes by column (lanes 8c..8c+7).
  const Vec by_column =
      _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,  //
                       0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  Vec s[4];
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm256_shuffle_epi8(
        _mm256_loadu_si256(reinterpret_cast<const Vec*>(hits + 8 * i)),
        by_column);  // half h, dword c: column c of steps 8i + 4h + 0..3
  }
  const Vec p0 = _mm256_unpacklo_epi32(s[0], s[1]);
  const Vec p1 = _mm256_unpackhi_epi32(s[0], s[1]);
  const Vec p2 = _mm256_unpacklo_epi32(s[2], s[3]);
  const Vec p3 = _mm256_unpackhi_epi32(s[2], s[3]);
  // q[c]: half h, dword i = column c of steps 8i + 4h + 0..3; vpermd puts
  // those dwords in step order.
  const Vec step_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const Vec q[4] = {
      _mm256_unpacklo_epi64(p0, p2), _mm256_unpackhi_epi64(p0, p2),
      _mm256_unpacklo_epi64(p1, p3), _mm256_unpackhi_epi64(p1, p3)};
  for (int c = 0; c < 4; ++c) {
    Vec y = _mm256_permutevar8x32_epi32(q[c], step_order);  // byte t: step t
    // vpmovmskb reads bit 7 of every byte: lane 8c + 7 first, then shift.
    for (int bit = 7; bit >= 0; --bit) {
      lane_bits[8 * c + bit] =
          static_cast<CrcLaneBits>(_mm256_movemask_epi8(y));
      y = _mm256_add_epi8(y, y);
    }
  }
}

}  // namespace chunkd::chunking::kernels::avx2

#endif  // CHUNKD_CHUNKING_KERNELS_AVX2_SIMD_H_
