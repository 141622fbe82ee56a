// buzhash, stage-1 bodies (definition in ../functions.h; README.md): bit p
// is set when H(p) % d == d - 1, H(p) the buzhash of the 48 bytes ending at
// p. The scalar definition, and the vector bodies below.
//
// The candidate test without a division. h % d == d - 1 means d divides
// h + 1, an integer in [1, 2^32]. With d = odd * 2^s, a 32-bit n is a
// multiple of d exactly when rotr32(n * inverse(odd), s) <= (2^32 - 1) / d
// (multiplying by the inverse maps the multiples of d onto the small values;
// Hacker's Delight, 10-17). Computed in 32 bits, h + 1 wraps to 0 for
// h = 2^32 - 1, which the test then accepts: right when d is a power of two
// (2^32 - 1 leaves remainder d - 1), wrong otherwise. For such d, subtracting
// a bias of 1 before the unsigned comparison turns that 0 into 2^32 - 1,
// above every limit, and leaves the other values' verdict unchanged. desync
// v1.0.4 tests the same way; kernels_test checks the bits against the scalar
// kernel's plain h % d on crafted windows with the edge values.
//
// Two bodies, chosen by the instruction set this file is compiled for; the
// ISA layer (simd.h) has no primitives for either, so they use the
// intrinsics of that set directly.
//
// AVX-512 (VBMI): sixteen consecutive positions per vector. With
// b(j) = rotr32(table[data[j]], j mod 32),
//   H(p) = rotl32(G(p), p mod 32),  G(p) = XOR of b(j) over j in [p-47, p]
// (each term of H is rotl32(table[data[j]], p - j)), so H needs one table
// lookup per byte and a sliding XOR instead of a serial roll. The lookups
// are byte-sliced: each byte plane of the table is four 64-byte vectors, and
// two vpermi2b plus a blend on the top index bit read 64 entries of a plane
// at once; unpacking the four planes gives the 32-bit entries, in an order
// that a vpermb of the input bytes beforehand makes positional. The sliding
// XOR over 48 positions is the XOR over 16 (four shift-and-XOR doublings
// with valignd across the previous vector) of this vector and the two
// before. The rotation amounts count positions from begin - 64 instead of
// from 0: a shift common to j and p, which cancels in
// rotl32(rotr32(x, j - c), p - c) = rotl32(x, p - j). Each call starts 64
// positions early (one block of warm-up); bytes before data[0] are given
// b = 0, which is the shorter window of the definition.
//
// AVX2: the form above would need a gather per eight bytes (AVX2 has no
// byte permute across 128 bits for sliced lookups; gathers are slow on many
// AVX2 cores) and two variable rotations of three instructions each, so the
// hash rolls in kBuzhashLanes interleaved scalar lanes, consecutive
// word-aligned pieces of the range, each warmed up over the 48 bytes before
// its first position:
//   h = rotl32(h, 1) ^ table[in] ^ rotl32(table[out], 16)
// with the second table pre-rotated; the hashes of each 64 positions go to
// a buffer that the candidate test then reads eight at a time.
//
// Cost per call: AVX-512 builds its 16 plane vectors (48 shuffles) and runs
// 64 positions of warm-up; AVX2 rotates its table (256 entries) and warms up
// 48 positions per lane. Stack: the AVX2 table and buffers, about 2 KiB.

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void BuzhashBody(const uint8_t* data, size_t begin, size_t end,
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

#else  // the vector kernel sets

inline constexpr size_t kBuzhashWindow = 48;

// The constants of the candidate test for a discriminator d (see above).
// A plain value; no defaults.
struct BuzhashDivisor {
  uint32_t inverse;  // of d's odd factor, modulo 2^32
  uint32_t shift;    // s: d's trailing zero bits
  uint32_t bias;     // 1 when d is not a power of two, else 0
  uint32_t limit;    // (2^32 - 1) / d - bias
};

// REQUIRES: d >= 1.
inline BuzhashDivisor MakeBuzhashDivisor(uint32_t d) {
  BuzhashDivisor v;
  v.shift = static_cast<uint32_t>(__builtin_ctz(d));
  const uint32_t odd = d >> v.shift;
  // odd * odd == 1 modulo 8 (3 bits right); each Newton step doubles the
  // bits that are right: 6, 12, 24, 48.
  uint32_t x = odd;
  for (int i = 0; i < 4; ++i) x *= 2 - odd * x;
  v.inverse = x;
  v.bias = odd > 1 ? 1 : 0;
  v.limit = 0xFFFFFFFFu / d - v.bias;
  return v;
}

#if defined(__AVX512VBMI__) && defined(__AVX512BW__)

// vpermb index applied to a block's bytes before the lookups: the 8-bit and
// then 16-bit unpacks of the four planes interleave within 128-bit lanes, so
// that dword t of lane q of the k-th result comes from byte 16q + 4k + t.
// Placing input byte 16k + 4q + t there puts positions 16k .. 16k + 15 in
// order into result k.
struct BuzhashSwizzle {
  alignas(64) uint8_t index[64] = {};
  constexpr BuzhashSwizzle() {
    for (int q = 0; q < 4; ++q) {
      for (int k = 0; k < 4; ++k) {
        for (int t = 0; t < 4; ++t) {
          index[16 * q + 4 * k + t] = static_cast<uint8_t>(16 * k + 4 * q + t);
        }
      }
    }
  }
};
inline constexpr BuzhashSwizzle kBuzhashSwizzle;

// planes[c][r]: byte c of table entries 64 r .. 64 r + 63.
inline void BuzhashPlanes(const uint32_t* table, __m512i planes[4][4]) {
  // Byte j (< 32) of the vpermi2b result: byte 4 j + c of two vectors of
  // 16 entries, i.e. byte c of entry j of those 32.
  __m512i index = _mm512_setr_epi32(
      0x0C080400, 0x1C181410, 0x2C282420, 0x3C383430, 0x4C484440, 0x5C585450,
      0x6C686460, 0x7C787470, 0x0C080400, 0x1C181410, 0x2C282420, 0x3C383430,
      0x4C484440, 0x5C585450, 0x6C686460, 0x7C787470);
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < 4; ++r) {
      const uint32_t* e = table + 64 * r;
      const __m512i lo = _mm512_permutex2var_epi8(_mm512_loadu_si512(e), index,
                                                  _mm512_loadu_si512(e + 16));
      const __m512i hi = _mm512_permutex2var_epi8(
          _mm512_loadu_si512(e + 32), index, _mm512_loadu_si512(e + 48));
      planes[c][r] = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, lo, hi);
    }
    index = _mm512_add_epi8(index, _mm512_set1_epi8(1));
  }
}

// The state carried from one vector of 16 positions to the next: the
// previous vector's b and partial XORs over 2, 4 and 8 positions, and the
// XORs over 16 positions of the previous two vectors. Zero: no bytes before.
struct BuzhashSums {
  __m512i b = _mm512_setzero_si512();
  __m512i x2 = _mm512_setzero_si512();
  __m512i x4 = _mm512_setzero_si512();
  __m512i x8 = _mm512_setzero_si512();
  __m512i x16_1 = _mm512_setzero_si512();
  __m512i x16_2 = _mm512_setzero_si512();
};

// The test's constants as vectors.
struct BuzhashTestConsts {
  __m512i inverse;
  __m512i add;  // inverse, minus the bias when it can be folded in
  __m512i shift;
  __m512i bias;
  __m512i limit;
};

// G(p) for 16 positions from their b, then H and the candidate mask.
// kOdd: d is odd, so no rotation and the bias folds into the addition.
template <bool kOdd>
inline __mmask16 BuzhashStep(__m512i b, __m512i rot, BuzhashSums& s,
                             const BuzhashTestConsts& k) {
  const __m512i x2 = _mm512_xor_si512(b, _mm512_alignr_epi32(b, s.b, 15));
  const __m512i x4 = _mm512_xor_si512(x2, _mm512_alignr_epi32(x2, s.x2, 14));
  const __m512i x8 = _mm512_xor_si512(x4, _mm512_alignr_epi32(x4, s.x4, 12));
  const __m512i x16 = _mm512_xor_si512(x8, _mm512_alignr_epi32(x8, s.x8, 8));
  const __m512i g = _mm512_ternarylogic_epi32(x16, s.x16_1, s.x16_2, 0x96);
  s.b = b;
  s.x2 = x2;
  s.x4 = x4;
  s.x8 = x8;
  s.x16_2 = s.x16_1;
  s.x16_1 = x16;
  const __m512i h = _mm512_rolv_epi32(g, rot);
  // (h + 1) * inverse, as h * inverse + inverse.
  __m512i t = _mm512_add_epi32(_mm512_mullo_epi32(h, k.inverse), k.add);
  if (!kOdd) t = _mm512_sub_epi32(_mm512_rorv_epi32(t, k.shift), k.bias);
  return _mm512_cmple_epu32_mask(t, k.limit);
}

// The candidate bits of the 64 positions whose bytes are `x`. kMasked: some
// of them lie before data[0]; `live` has the bits of the others.
template <bool kOdd, bool kMasked>
inline uint64_t BuzhashBlock(__m512i x, const __m512i planes[4][4],
                             __m512i swizzle, const __m512i rot[2],
                             BuzhashSums& s, const BuzhashTestConsts& k,
                             uint64_t live) {
  x = _mm512_permutexvar_epi8(swizzle, x);
  const __mmask64 upper = _mm512_movepi8_mask(x);  // entries 128 .. 255
  __m512i p[4];
  for (int c = 0; c < 4; ++c) {
    const __m512i lo = _mm512_permutex2var_epi8(planes[c][0], x, planes[c][1]);
    const __m512i hi = _mm512_permutex2var_epi8(planes[c][2], x, planes[c][3]);
    p[c] = _mm512_mask_blend_epi8(upper, lo, hi);
  }
  const __m512i w01l = _mm512_unpacklo_epi8(p[0], p[1]);
  const __m512i w01h = _mm512_unpackhi_epi8(p[0], p[1]);
  const __m512i w23l = _mm512_unpacklo_epi8(p[2], p[3]);
  const __m512i w23h = _mm512_unpackhi_epi8(p[2], p[3]);
  const __m512i entries[4] = {
      _mm512_unpacklo_epi16(w01l, w23l), _mm512_unpackhi_epi16(w01l, w23l),
      _mm512_unpacklo_epi16(w01h, w23h), _mm512_unpackhi_epi16(w01h, w23h)};
  uint64_t bits = 0;
  for (int v = 0; v < 4; ++v) {
    __m512i b = _mm512_rorv_epi32(entries[v], rot[v & 1]);
    if (kMasked) {
      b = _mm512_maskz_mov_epi32(static_cast<__mmask16>(live >> (16 * v)), b);
    }
    bits |= static_cast<uint64_t>(BuzhashStep<kOdd>(b, rot[v & 1], s, k))
            << (16 * v);
  }
  return bits;
}

template <bool kOdd>
void BuzhashSliced(const uint8_t* data, size_t begin, size_t end,
                   const BuzhashParams& params, uint64_t* hits) {
  __m512i planes[4][4];
  BuzhashPlanes(params.table, planes);
  const __m512i swizzle = _mm512_load_si512(kBuzhashSwizzle.index);
  const __m512i rot[2] = {
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
      _mm512_setr_epi32(16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
                        30, 31)};
  const BuzhashDivisor div = MakeBuzhashDivisor(params.discriminator);
  BuzhashTestConsts k;
  k.inverse = _mm512_set1_epi32(static_cast<int>(div.inverse));
  k.add = _mm512_set1_epi32(
      static_cast<int>(kOdd ? div.inverse - div.bias : div.inverse));
  k.shift = _mm512_set1_epi32(static_cast<int>(div.shift));
  k.bias = _mm512_set1_epi32(static_cast<int>(div.bias));
  k.limit = _mm512_set1_epi32(static_cast<int>(div.limit));
  BuzhashSums sums;
  alignas(64) uint8_t edge[64];
  const size_t n = end - begin;
  const size_t words = CeilDiv(n, 64);
  // Block u holds positions begin - 64 + 64 u ..; block 0 is the warm-up.
  for (size_t u = 0; u <= words; ++u) {
    const ptrdiff_t pos = static_cast<ptrdiff_t>(begin + 64 * u) - 64;
    __m512i x;
    if (Inside(pos, 64, end)) {
      x = _mm512_loadu_si512(data + pos);
    } else {
      CopyClamped(data, pos, 64, end, edge);
      x = _mm512_load_si512(edge);
    }
    uint64_t bits;
    if (pos < 0) {
      const uint64_t live = ~LowBits(static_cast<size_t>(-pos));
      bits = BuzhashBlock<kOdd, true>(x, planes, swizzle, rot, sums, k, live);
    } else {
      bits = BuzhashBlock<kOdd, false>(x, planes, swizzle, rot, sums, k, 0);
    }
    if (u > 0) hits[u - 1] = bits;
  }
  if (n % 64 != 0) hits[words - 1] &= LowBits(n % 64);
}

inline void BuzhashBody(const uint8_t* data, size_t begin, size_t end,
                        const BuzhashParams& params, uint64_t* hits) {
  if (begin >= end) return;
  if (params.discriminator % 2 != 0) {
    BuzhashSliced<true>(data, begin, end, params, hits);
  } else {
    BuzhashSliced<false>(data, begin, end, params, hits);
  }
}

#else  // AVX2

// Four lanes: their hashes and pointers fit the general registers; three
// and six measured 7 % and 8 % slower (256 KiB calls, random data).
inline constexpr int kBuzhashLanes = 4;

inline uint32_t BuzhashRotl(uint32_t x, unsigned n) {
  return (x << n) | (x >> ((32 - n) & 31));
}

// The candidate bits of the 64 hashes in h[0, 64).
template <bool kOdd>
inline uint64_t BuzhashTest64(const uint32_t* h, const BuzhashDivisor& div) {
  const __m256i inverse = _mm256_set1_epi32(static_cast<int>(div.inverse));
  const __m256i add = _mm256_set1_epi32(
      static_cast<int>(kOdd ? div.inverse - div.bias : div.inverse));
  const __m256i bias = _mm256_set1_epi32(static_cast<int>(div.bias));
  const __m256i limit = _mm256_set1_epi32(static_cast<int>(div.limit));
  const __m128i right = _mm_cvtsi32_si128(static_cast<int>(div.shift));
  const __m128i left =
      _mm_cvtsi32_si128(static_cast<int>((32 - div.shift) & 31));
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) {
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + 8 * i));
    __m256i t = _mm256_add_epi32(_mm256_mullo_epi32(v, inverse), add);
    if (!kOdd) {
      t = _mm256_or_si256(_mm256_srl_epi32(t, right),
                          _mm256_sll_epi32(t, left));
      t = _mm256_sub_epi32(t, bias);
    }
    const __m256i ok = _mm256_cmpeq_epi32(_mm256_min_epu32(t, limit), t);
    bits |= static_cast<uint64_t>(static_cast<uint32_t>(
                _mm256_movemask_ps(_mm256_castsi256_ps(ok))))
            << (8 * i);
  }
  return bits;
}

// The rolling tables: the entries, and the entries rotated by 48 (= 16).
struct BuzhashRollTables {
  const uint32_t* in;
  uint32_t out[256];
};

// Rolls one lane over positions [p, p + len) from h = H(p - 1) into
// h_out[0, len); returns the last hash. REQUIRES: p >= 48.
inline uint32_t BuzhashRollLane(const uint8_t* data, size_t p, size_t len,
                                uint32_t h, const BuzhashRollTables& t,
                                uint32_t* h_out) {
  for (size_t i = 0; i < len; ++i) {
    h = BuzhashRotl(h, 1) ^ t.in[data[p + i]] ^
        t.out[data[p + i - kBuzhashWindow]];
    h_out[i] = h;
  }
  return h;
}

template <bool kOdd>
void BuzhashLanesFrom48(const uint8_t* data, size_t begin, size_t end,
                        const BuzhashParams& params, uint64_t* hits) {
  constexpr int K = kBuzhashLanes;
  BuzhashRollTables t;
  t.in = params.table;
  // Eight entries per step: a sequential-scan block pays this per call.
  for (int i = 0; i < 256; i += 8) {
    const __m256i e =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.in + i));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(t.out + i),
        _mm256_or_si256(_mm256_slli_epi32(e, 16), _mm256_srli_epi32(e, 16)));
  }
  const BuzhashDivisor div = MakeBuzhashDivisor(params.discriminator);
  const size_t n = end - begin;
  const size_t words = CeilDiv(n, 64);
  const size_t lane_words = CeilDiv(words, K);
  const size_t lane_len = 64 * lane_words;
  // Lanes 0 .. K-2 are lane_len long; the last one may be shorter or empty.
  size_t start[K];
  uint32_t h[K];
  for (int l = 0; l < K; ++l) {
    start[l] = Min(begin + l * lane_len, end);
    h[l] = 0;
  }
  // Warm-up: H of the 48 bytes before each lane, the lanes interleaved.
  for (size_t i = kBuzhashWindow; i > 0; --i) {
    for (int l = 0; l < K; ++l) {
      h[l] = BuzhashRotl(h[l], 1) ^ t.in[data[start[l] - i]];
    }
  }
  const size_t common = (end - start[K - 1]) / 64;  // whole words of all lanes
  // Zeroed: a lane's last word may fill only part of its buffer, which the
  // test reads whole (and masks).
  alignas(32) uint32_t buf[K][64] = {};
  for (size_t w = 0; w < common; ++w) {
    for (size_t i = 0; i < 64; ++i) {
      for (int l = 0; l < K; ++l) {
        const uint8_t* q = data + start[l] + 64 * w + i;
        h[l] = BuzhashRotl(h[l], 1) ^ t.in[q[0]] ^ t.out[*(q - kBuzhashWindow)];
        buf[l][i] = h[l];
      }
    }
    for (int l = 0; l < K; ++l) {
      hits[l * lane_words + w] = BuzhashTest64<kOdd>(buf[l], div);
    }
  }
  // The rest of every lane, one lane after the other.
  for (int l = 0; l < K; ++l) {
    const size_t lane_end = Min(start[l] + lane_len, end);
    for (size_t p = start[l] + 64 * common; p < lane_end; p += 64) {
      const size_t len = Min<size_t>(64, lane_end - p);
      h[l] = BuzhashRollLane(data, p, len, h[l], t, buf[0]);
      uint64_t bits = BuzhashTest64<kOdd>(buf[0], div);
      if (len < 64) bits &= LowBits(len);
      hits[(p - begin) / 64] = bits;
    }
  }
}

inline void BuzhashBody(const uint8_t* data, size_t begin, size_t end,
                        const BuzhashParams& params, uint64_t* hits) {
  if (begin >= end) return;
  // The lanes drop the byte 48 back at every step, which positions before
  // 48 lack: their word goes to the scalar kernel (baseline code: fine).
  if (begin < kBuzhashWindow) {
    const size_t first_end = Min(end, begin + 64);
    scalar::Buzhash(data, begin, first_end, params, hits);
    begin = first_end;
    ++hits;
    if (begin >= end) return;
  }
  if (params.discriminator % 2 != 0) {
    BuzhashLanesFrom48<true>(data, begin, end, params, hits);
  } else {
    BuzhashLanesFrom48<false>(data, begin, end, params, hits);
  }
}

#endif

#endif  // CHUNKD_KERNEL_SET_SCALAR
