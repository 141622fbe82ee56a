// GHASH with VPCLMULQDQ, four blocks per 512-bit register.
//
// Representation (as in Intel's and Linux's GCM code): each 16-byte block is
// byte-reversed, so the coefficient of x^0 (the first byte's top bit) is bit
// 127 of a 128-bit integer and x^127 is bit 0: the polynomial reflected. In
// that form the carry-less product of two elements is the reflected product
// shifted by one bit, so the key powers are stored multiplied by x (one
// left shift, reduced), and a product is reduced by two Montgomery steps
// that divide by x^128 modulo the reflected polynomial x^128 + x^127 +
// x^126 + x^121 + 1, each one VPCLMULQDQ with x^63 + x^62 + x^57
// (0xc2 << 56) and a swap of 64-bit halves.
//
// Aggregated reduction: 32 blocks X1..X32 (eight registers) and the running
// value Y become (Y + X1)·H^32 + X2·H^31 + ... + X32·H; the 256-bit products
// are summed unreduced (low, middle, high parts), reduced once per 512
// bytes, then the four 128-bit lanes are XORed into the new Y. Y is a serial
// dependency (multiply, reduce, fold: some 30 cycles), so more blocks per
// reduction go faster: 32 ran about 1.1x as fast as 16 on Zen 5. The main
// loop multiplies by Karatsuba (three VPCLMULQDQ per register instead of
// four, for two cheap vector operations): the carry-less multiplier is then
// the limit, and it ran 1.25x as fast as the schoolbook product.
#include "fingerprint/vpclmul/ghash_vpclmul.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chunkd::fingerprint::vpclmul {
namespace {

constexpr size_t kBlock = 16;
constexpr size_t kStride = kBlock * kPowers;  // bytes per reduction

// Reverses the bytes of each 128-bit lane.
inline __m512i ByteReverse(__m512i v) {
  // Per lane, bytes 15..0 (fully set constants and masked forms below: GCC
  // 12 warns about the undefined operand of the unmasked intrinsics).
  const __m512i reverse = _mm512_set4_epi32(0x00010203, 0x04050607,
                                            0x08090a0b, 0x0c0d0e0f);
  return _mm512_shuffle_epi8(v, reverse);
}

// Swaps the 64-bit halves of each lane.
inline __m512i SwapHalves(__m512i v) {
  return _mm512_maskz_shuffle_epi32(0xffff, v, _MM_PERM_BADC);
}

inline __m512i Xor3(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi64(a, b, c, 0x96);
}

// Adds the 256-bit products x·h of each lane to lo, mid and hi (mid counts
// 64 bits up).
inline void MulAdd(__m512i x, __m512i h, __m512i* lo, __m512i* mid,
                   __m512i* hi) {
  *lo = _mm512_xor_si512(*lo, _mm512_clmulepi64_epi128(x, h, 0x00));
  *hi = _mm512_xor_si512(*hi, _mm512_clmulepi64_epi128(x, h, 0x11));
  *mid = Xor3(*mid, _mm512_clmulepi64_epi128(x, h, 0x01),
              _mm512_clmulepi64_epi128(x, h, 0x10));
}

// Karatsuba: adds x_lo·h_lo to lo, x_hi·h_hi to hi and
// (x_lo + x_hi)·(h_lo + h_hi) to mid; mid + lo + hi is then the middle part.
// hk holds h_lo + h_hi in its low half.
inline void MulAddKaratsuba(__m512i x, __m512i h, __m512i hk, __m512i* lo,
                            __m512i* mid, __m512i* hi) {
  *lo = _mm512_xor_si512(*lo, _mm512_clmulepi64_epi128(x, h, 0x00));
  *hi = _mm512_xor_si512(*hi, _mm512_clmulepi64_epi128(x, h, 0x11));
  const __m512i xs = _mm512_xor_si512(x, SwapHalves(x));
  *mid = _mm512_xor_si512(*mid, _mm512_clmulepi64_epi128(xs, hk, 0x00));
}

// lo + mid·x^64 + hi·x^128, times x^-128, modulo the reflected polynomial,
// in each lane.
inline __m512i Reduce(__m512i lo, __m512i mid, __m512i hi) {
  const __m512i poly =
      _mm512_set4_epi64(static_cast<long long>(0xc200000000000000ull), 1,
                        static_cast<long long>(0xc200000000000000ull), 1);
  // Cancel the low 64 bits of lo: add lo_0·(x^128 + poly), x^64 up.
  __m512i t = _mm512_clmulepi64_epi128(poly, lo, 0x01);
  mid = Xor3(mid, SwapHalves(lo), t);
  // Then the low 64 bits of mid, the same way.
  t = _mm512_clmulepi64_epi128(poly, mid, 0x01);
  return Xor3(hi, SwapHalves(mid), t);
}

// The low 128 bits.
inline __m128i Low128(__m512i v) {
  return _mm512_maskz_extracti32x4_epi32(0xf, v, 0);
}

// The XOR of the four 128-bit lanes.
inline __m128i FoldLanes(__m512i v) {
  v = _mm512_xor_si512(v, _mm512_maskz_shuffle_i64x2(0xff, v, v, 0x4e));
  v = _mm512_xor_si512(v, _mm512_maskz_shuffle_i64x2(0xff, v, v, 0xb1));
  return Low128(v);
}

// Y' = (Y + X1)·H^k + X2·H^(k-1) + ... + Xk·H for the k (1..kPowers)
// blocks at `blocks`; key holds H^kPowers .. H^1.
inline __m128i Absorb(__m128i y, const unsigned char* blocks, int k,
                      const uint64_t* key) {
  const uint64_t* powers = key + 2 * (kPowers - k);
  __m512i lo = _mm512_setzero_si512();
  __m512i mid = _mm512_setzero_si512();
  __m512i hi = _mm512_setzero_si512();
  for (int v = 0; 4 * v < k; ++v) {
    const int lanes = k - 4 * v < 4 ? k - 4 * v : 4;
    const __mmask8 mask = static_cast<__mmask8>((1u << (2 * lanes)) - 1);
    __m512i x = ByteReverse(_mm512_maskz_loadu_epi64(mask, blocks + 64 * v));
    if (v == 0) x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    const __m512i h = _mm512_maskz_loadu_epi64(mask, powers + 8 * v);
    MulAdd(x, h, &lo, &mid, &hi);
  }
  return FoldLanes(Reduce(lo, mid, hi));
}

// a·b·x^-128 for single 128-bit values.
__m128i MulReduce128(__m128i a, __m128i b) {
  __m512i lo = _mm512_setzero_si512();
  __m512i mid = _mm512_setzero_si512();
  __m512i hi = _mm512_setzero_si512();
  MulAdd(_mm512_zextsi128_si512(a), _mm512_zextsi128_si512(b), &lo, &mid,
         &hi);
  return Low128(Reduce(lo, mid, hi));
}

}  // namespace

void PrepareKey(const unsigned char* h, uint64_t* key) {
  // H reflected: the bytes reversed.
  unsigned char reversed[kBlock];
  for (size_t i = 0; i < kBlock; ++i) reversed[i] = h[kBlock - 1 - i];
  uint64_t lo = 0, hi = 0;
  std::memcpy(&lo, reversed, 8);
  std::memcpy(&hi, reversed + 8, 8);
  // H·x: shift left by one; x^128 is congruent to x^127 + x^126 + x^121 + 1.
  const uint64_t carry = hi >> 63;
  hi = (hi << 1) | (lo >> 63);
  lo <<= 1;
  if (carry) {
    hi ^= 0xc200000000000000ull;
    lo ^= 1;
  }
  const __m128i h1 =
      _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
  // (H^i·x)(H·x)·x^-128 = H^(i+1)·x: the powers stay in the same form.
  __m128i power = h1;
  for (int i = 1; i <= kPowers; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(key + 2 * (kPowers - i)),
                     power);
    power = MulReduce128(power, h1);
  }
}

// How far ahead of the block being hashed its lines are prefetched. The
// RapidCDC hint chain keys each chunk as it first reaches it, straight from
// memory: without the prefetch, about 40 % of that time waited for the
// first load of a block; in the cache it costs nothing measurable
// (content_key_bench).
constexpr size_t kPrefetchAhead = 2048;

void GhashAad(const uint64_t* key, const unsigned char* data, size_t size,
              unsigned char* out) {
  __m128i y = _mm_setzero_si128();
  if (size >= kStride) {
    constexpr int kVectors = kPowers / 4;
    __m512i h[kVectors];
    __m512i hk[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      h[v] = _mm512_loadu_si512(key + 8 * v);
      hk[v] = _mm512_xor_si512(h[v], SwapHalves(h[v]));
    }
    const unsigned char* p = data;
    const unsigned char* const end = data + (size - size % kStride);
    for (; p != end; p += kStride) {
      for (size_t v = 0; v < kStride / 64; ++v) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchAhead + 64 * v),
                     _MM_HINT_T0);
      }
      __m512i lo = _mm512_setzero_si512();
      __m512i mid = _mm512_setzero_si512();
      __m512i hi = _mm512_setzero_si512();
      // The blocks that do not depend on Y first, so that their products
      // overlap the previous iteration's reduction.
      for (int v = kVectors - 1; v > 0; --v) {
        MulAddKaratsuba(ByteReverse(_mm512_loadu_si512(p + 64 * v)), h[v],
                        hk[v], &lo, &mid, &hi);
      }
      const __m512i x0 = _mm512_xor_si512(
          ByteReverse(_mm512_loadu_si512(p)), _mm512_zextsi128_si512(y));
      MulAddKaratsuba(x0, h[0], hk[0], &lo, &mid, &hi);
      y = FoldLanes(Reduce(lo, Xor3(mid, lo, hi), hi));
    }
  }
  // The tail, zero-padded to whole blocks, then the length block: the bit
  // lengths of the data and of the empty ciphertext, 64-bit big-endian.
  const size_t rest = size % kStride;
  alignas(64) unsigned char tail[kStride + kBlock] = {};
  if (rest > 0) std::memcpy(tail, data + (size - rest), rest);
  const size_t rest_blocks = (rest + kBlock - 1) / kBlock;
  const uint64_t bits = static_cast<uint64_t>(size) * 8;
  for (int i = 0; i < 8; ++i) {
    tail[kBlock * rest_blocks + static_cast<size_t>(i)] =
        static_cast<unsigned char>(bits >> (56 - 8 * i));
  }
  int blocks = static_cast<int>(rest_blocks) + 1;
  const unsigned char* q = tail;
  if (blocks > kPowers) {
    y = Absorb(y, q, kPowers, key);
    q += kStride;
    blocks -= kPowers;
  }
  y = Absorb(y, q, blocks, key);
  // Back to GCM byte order.
  unsigned char reflected[kBlock];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(reflected), y);
  for (size_t i = 0; i < kBlock; ++i) out[i] = reflected[kBlock - 1 - i];
}

}  // namespace chunkd::fingerprint::vpclmul
