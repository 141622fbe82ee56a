// AVX-512 primitives of the generic kernel bodies (see generic/README.md):
// 64 lanes of one byte per zmm register. Include only from avx512/avx512.cc,
// the one translation unit compiled with the AVX-512 flags.
//
// Uses F, BW (byte compares, vpmovb2m), DQ (kmovb), VBMI (vpermb,
// vpermi2b), IFMA (vpmadd52luq, in avx512.cc) and GFNI (gf2p8affineqb):
// the flags of kernels/CMakeLists.txt, which the CPU check follows.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CHUNKING_KERNELS_AVX512_SIMD_H_
#define CHUNKD_CHUNKING_KERNELS_AVX512_SIMD_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunking/kernels/crc32_tables.h"
#include "chunking/kernels/intrinsics.h"

namespace chunkd::chunking::kernels::avx512 {

#include "chunking/kernels/generic/common.h"

using Vec = __m512i;

inline void PrefetchLine(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

inline Vec VZero() { return _mm512_setzero_si512(); }

// vpermb index of the 8x8 byte transpose inside each qword: byte 8s + i of
// the result is byte 8i + s of the source.
alignas(64) inline constexpr uint8_t kByteTranspose8x8[64] = {
    0, 8,  16, 24, 32, 40, 48, 56, 1, 9,  17, 25, 33, 41, 49, 57,
    2, 10, 18, 26, 34, 42, 50, 58, 3, 11, 19, 27, 35, 43, 51, 59,
    4, 12, 20, 28, 36, 44, 52, 60, 5, 13, 21, 29, 37, 45, 53, 61,
    6, 14, 22, 30, 38, 46, 54, 62, 7, 15, 23, 31, 39, 47, 55, 63};

// As kByteTranspose8x8, but the bytes of each result qword in reverse order
// (byte 8s + 7 - i comes from byte 8i + s), the row order GF2P8AFFINEQB
// wants for a bit transpose.
alignas(64) inline constexpr uint8_t kByteTranspose8x8Reversed[64] = {
    56, 48, 40, 32, 24, 16, 8,  0, 57, 49, 41, 33, 25, 17, 9,  1,
    58, 50, 42, 34, 26, 18, 10, 2, 59, 51, 43, 35, 27, 19, 11, 3,
    60, 52, 44, 36, 28, 20, 12, 4, 61, 53, 45, 37, 29, 21, 13, 5,
    62, 54, 46, 38, 30, 22, 14, 6, 63, 55, 47, 39, 31, 23, 15, 7};

inline Vec LoadIndex(const uint8_t (&index)[64]) {
  return _mm512_load_si512(index);
}

// Transposes the 8x8 matrix of qwords in r: afterwards qword j of r[i] is
// what was qword i of r[j]. 24 two-source shuffles.
inline void Transpose8x8Qwords(Vec r[8]) {
  Vec t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm512_unpacklo_epi64(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi64(r[i], r[i + 1]);
  }
  // t[0]: r0.q0 r1.q0 | r0.q2 r1.q2 | r0.q4 r1.q4 | r0.q6 r1.q6; t[1]: odd q.
  const Vec lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const Vec hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  Vec u[8];
  u[0] = _mm512_permutex2var_epi64(t[0], lo, t[2]);  // r0..3: q0 | q4
  u[1] = _mm512_permutex2var_epi64(t[0], hi, t[2]);  // q2 | q6
  u[2] = _mm512_permutex2var_epi64(t[1], lo, t[3]);  // q1 | q5
  u[3] = _mm512_permutex2var_epi64(t[1], hi, t[3]);  // q3 | q7
  u[4] = _mm512_permutex2var_epi64(t[4], lo, t[6]);  // r4..7
  u[5] = _mm512_permutex2var_epi64(t[4], hi, t[6]);
  u[6] = _mm512_permutex2var_epi64(t[5], lo, t[7]);
  u[7] = _mm512_permutex2var_epi64(t[5], hi, t[7]);
  const Vec first = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
  const Vec second = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  r[0] = _mm512_permutex2var_epi64(u[0], first, u[4]);
  r[4] = _mm512_permutex2var_epi64(u[0], second, u[4]);
  r[2] = _mm512_permutex2var_epi64(u[1], first, u[5]);
  r[6] = _mm512_permutex2var_epi64(u[1], second, u[5]);
  r[1] = _mm512_permutex2var_epi64(u[2], first, u[6]);
  r[5] = _mm512_permutex2var_epi64(u[2], second, u[6]);
  r[3] = _mm512_permutex2var_epi64(u[3], first, u[7]);
  r[7] = _mm512_permutex2var_epi64(u[3], second, u[7]);
}

// Transposes the 8x8 bit matrix in each qword, given its rows (bytes) in
// reverse order: bit k of byte i of the result is bit i of source byte 7 - k.
inline Vec TransposeBitsReversed(Vec x) {
  // GF2P8AFFINEQB with the data as the matrix and the unit bytes 1 << i as
  // the vectors: result byte i, bit k = parity(matrix byte 7 - k & 1 << i).
  return _mm512_gf2p8affine_epi64_epi8(
      _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull)), x, 0);
}

// ---------------------------------------------------------------- seqcdc --

inline void GtLt64(const uint8_t* cur, uint64_t* gt, uint64_t* lt) {
  const Vec a = _mm512_loadu_si512(cur);
  const Vec b = _mm512_loadu_si512(cur - 1);
  *gt = _mm512_cmpgt_epu8_mask(a, b);
  *lt = _mm512_cmplt_epu8_mask(a, b);
}

// ----------------------------------------------------------------- crc32 --

inline constexpr size_t kCrcLanes = 64;
using CrcLaneBits = uint64_t;

// The constants of one Crc32Lanes call, as vectors (MakeCrcConsts). A plain
// value on the caller's stack; no defaults.
struct CrcConsts {
  Vec byte_affine[4];  // byte j of T[x]
  Vec out_affine[4];   // byte j of OUT[x]
  Vec mask[4];         // byte j of the candidate mask, in every lane
};

inline CrcConsts MakeCrcConsts(uint32_t mask) {
  CrcConsts c;
  for (int j = 0; j < 4; ++j) {
    c.byte_affine[j] =
        _mm512_set1_epi64(static_cast<long long>(kCrcTables.byte_affine[j]));
    c.out_affine[j] =
        _mm512_set1_epi64(static_cast<long long>(kCrcTables.out_affine[j]));
    c.mask[j] = _mm512_set1_epi8(static_cast<char>(mask >> (8 * j)));
  }
  return c;
}

inline Vec Affine(Vec x, Vec matrix) {
  return _mm512_gf2p8affine_epi64_epi8(x, matrix, 0);
}

// XOR of three vectors in one vpternlogq.
inline Vec Xor3(Vec a, Vec b, Vec c) {
  return _mm512_ternarylogic_epi64(a, b, c, 0x96);
}

// 64 steps that only roll bytes in (the window is still filling).
inline void CrcWarmBlock(const CrcConsts& c, Vec state[4], const Vec* in) {
  Vec s0 = state[0], s1 = state[1], s2 = state[2], s3 = state[3];
  for (size_t t = 0; t < kCrcLanes; ++t) {
    const Vec x = _mm512_xor_si512(s0, in[t]);
    s0 = _mm512_xor_si512(Affine(x, c.byte_affine[0]), s1);
    s1 = _mm512_xor_si512(Affine(x, c.byte_affine[1]), s2);
    s2 = _mm512_xor_si512(Affine(x, c.byte_affine[2]), s3);
    s3 = Affine(x, c.byte_affine[3]);
  }
  state[0] = s0;
  state[1] = s1;
  state[2] = s2;
  state[3] = s3;
}

// 64 full rolling steps; hits[t] gets the candidate lanes of step t.
template <int kPlanes>
inline void CrcRollBlock(const CrcConsts& c, Vec state[4], const Vec* in,
                         const Vec* out, CrcLaneBits* hits) {
  Vec s0 = state[0], s1 = state[1], s2 = state[2], s3 = state[3];
  for (size_t t = 0; t < kCrcLanes; ++t) {
    const Vec x = _mm512_xor_si512(s0, in[t]);
    const Vec o = out[t];
    s0 = Xor3(Affine(x, c.byte_affine[0]), s1, Affine(o, c.out_affine[0]));
    s1 = Xor3(Affine(x, c.byte_affine[1]), s2, Affine(o, c.out_affine[1]));
    s2 = Xor3(Affine(x, c.byte_affine[2]), s3, Affine(o, c.out_affine[2]));
    s3 = _mm512_xor_si512(Affine(x, c.byte_affine[3]),
                          Affine(o, c.out_affine[3]));
    __mmask64 k = ~__mmask64{0};
    if (kPlanes >= 1) k = _mm512_testn_epi8_mask(s0, c.mask[0]);
    if (kPlanes >= 2) k = _mm512_mask_testn_epi8_mask(k, s1, c.mask[1]);
    if (kPlanes >= 3) k = _mm512_mask_testn_epi8_mask(k, s2, c.mask[2]);
    if (kPlanes >= 4) k = _mm512_mask_testn_epi8_mask(k, s3, c.mask[3]);
    hits[t] = k;
  }
  state[0] = s0;
  state[1] = s1;
  state[2] = s2;
  state[3] = s3;
}

// rows[l] (64 bytes each) -> out[t], byte l of which is rows[l][t].
// Two passes of 8x8 tiles through `scratch`: 8 rows at a time become qword
// columns, then 8 such groups become the steps.
inline void CrcTransposeRows(const uint8_t* const* rows, Vec* out,
                             Vec* scratch) {
  const Vec bytes = LoadIndex(kByteTranspose8x8);
  for (int g = 0; g < 8; ++g) {
    Vec r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm512_loadu_si512(rows[8 * g + i]);
    Transpose8x8Qwords(r);  // r[T] qword i: row 8g+i, steps 8T..8T+7
    for (int t = 0; t < 8; ++t) {
      // qword s: step 8T+s, byte i: row 8g+i
      scratch[8 * t + g] = _mm512_permutexvar_epi8(bytes, r[t]);
    }
  }
  for (int t = 0; t < 8; ++t) {
    Vec r[8];
    for (int g = 0; g < 8; ++g) r[g] = scratch[8 * t + g];
    Transpose8x8Qwords(r);  // r[s] qword g: step 8t+s, rows 8g..8g+7
    for (int s = 0; s < 8; ++s) out[8 * t + s] = r[s];
  }
}

// hits[t] (bit l: lane l at step t) -> lane_bits[l] (bit t).
inline void CrcTransposeHits(const CrcLaneBits* hits, CrcLaneBits* lane_bits) {
  const Vec rows = LoadIndex(kByteTranspose8x8Reversed);
  const Vec bytes = LoadIndex(kByteTranspose8x8);
  Vec r[8];
  for (int t = 0; t < 8; ++t) {
    // qword g: byte g of hits[8t..8t+7], reversed; then bit-transposed:
    // qword g byte i = lane 8g+i at steps 8t..8t+7.
    r[t] = TransposeBitsReversed(
        _mm512_permutexvar_epi8(rows, _mm512_loadu_si512(hits + 8 * t)));
  }
  Transpose8x8Qwords(r);  // r[g] qword t: lanes 8g..8g+7, steps 8t..8t+7
  for (int g = 0; g < 8; ++g) {
    _mm512_storeu_si512(lane_bits + 8 * g,
                        _mm512_permutexvar_epi8(bytes, r[g]));
  }
}

}  // namespace chunkd::chunking::kernels::avx512

#endif  // CHUNKD_CHUNKING_KERNELS_AVX512_SIMD_H_
