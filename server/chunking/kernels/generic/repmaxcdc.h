// repmaxcdc, stage-1 bodies (definition in ../functions.h; README.md): the
// largest windowed Gear hash W(p) of every group of 64 positions; the scalar
// definition, and interleaved scalar lanes for the vector sets.
//
// W is rolled in kRepMaxLanes interleaved scalar lanes, as fastcdc's rolling
// body does: each lane is a quarter of the range's whole groups, with its own
// 63 bytes of warm-up, and a step is a load of the byte, a load of the table
// entry and one `lea` (h' = 2h + gear[byte]); the loads are the limit. The
// vector units do no better at the lookups on the machines measured
// (docs/algorithms/repmaxcdc.md, "Stage 1"): a gather of eight entries costs
// as much as eight loads, and byte-plane lookups like the avx512 fastcdc
// kernel's, which would need all eight planes here, are slower than the
// loads already with six. What vectors do well is the maximum. So the lanes
// store their hashes step-major into a block of 64 x kRepMaxLanes words, and
// while they roll a group, the vector code folds the previous group's block
// into running maxima, eight steps at a time, in step with the rolling: the
// same vector work done in a burst between groups costs twice as much,
// holding scheduler entries that the rolling needs.
//
// A compare in the scalar loop instead would cost a compare and a
// conditional move per byte (20-40 % slower as measured), or a mispredicted
// branch at each of the ln 64 = 4.2 new maxima of a group.
//
// The maximum needs unsigned 64-bit compares: AVX-512 has them (vpmaxuq);
// with AVX2 the hashes are compared as signed numbers with the top bit
// flipped. The two variants below are chosen by the ISA's compiler flags.
//
// Ranges of fewer than kRepMaxLanes * kRepMaxMinLaneGroups whole groups, and
// the groups after the lanes' part, take the one-lane rolling loop.

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void RepMaxCdcBody(const uint8_t* data, size_t begin, size_t end,
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

#else  // the vector kernel sets

inline constexpr size_t kRepMaxLanes = 4;
inline constexpr size_t kRepMaxMinLaneGroups = 2;

// W of the position before `pos`, over at most 63 bytes (fewer at data[0]).
inline uint64_t RepMaxWarmUp(const uint8_t* data, size_t pos,
                             const uint64_t* gear) {
  uint64_t h = 0;
  for (size_t q = pos >= 63 ? pos - 63 : 0; q < pos; ++q) {
    h = (h << 1) + gear[data[q]];
  }
  return h;
}

// The definition in one rolling lane: the groups of [begin, end) from begin
// on, `h` being W of the position before begin.
inline void RepMaxCdcRoll(const uint8_t* data, size_t begin, size_t end,
                          const uint64_t* gear, uint64_t h, uint64_t* max) {
  for (size_t g = begin; g < end; g += 64) {
    const size_t stop = Min(end, g + 64);
    uint64_t best = 0;
    for (size_t p = g; p < stop; ++p) {
      h = (h << 1) + gear[data[p]];
      best = h > best ? h : best;
    }
    *max++ = best;
  }
}

#if defined(__AVX512F__)

// Running maxima of the four lanes: vector j holds steps 8i + 2j (qwords
// 0-3) and 8i + 2j + 1 (qwords 4-7) of every fold i.
struct RepMaxAcc {
  __m512i v[4];
};

inline RepMaxAcc RepMaxAccInit() {
  const __m512i zero = _mm512_setzero_si512();
  return RepMaxAcc{{zero, zero, zero, zero}};
}

// Folds eight steps (rows[0..7][0..3]) into the maxima. By value, so that
// the maxima stay in registers.
inline RepMaxAcc RepMaxFold(RepMaxAcc acc,
                            const uint64_t (*rows)[kRepMaxLanes]) {
  const uint64_t* r = &rows[0][0];
  // Written out: as a loop, GCC keeps the maxima in memory.
  acc.v[0] = _mm512_max_epu64(acc.v[0], _mm512_load_si512(r));
  acc.v[1] = _mm512_max_epu64(acc.v[1], _mm512_load_si512(r + 8));
  acc.v[2] = _mm512_max_epu64(acc.v[2], _mm512_load_si512(r + 16));
  acc.v[3] = _mm512_max_epu64(acc.v[3], _mm512_load_si512(r + 24));
  return acc;
}

inline void RepMaxLaneMax(const RepMaxAcc& acc, uint64_t* out) {
  const __m512i m = _mm512_max_epu64(_mm512_max_epu64(acc.v[0], acc.v[1]),
                                     _mm512_max_epu64(acc.v[2], acc.v[3]));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_max_epu64(_mm512_castsi512_si256(m),
                                      _mm512_extracti64x4_epi64(m, 1)));
}

#else  // AVX2

// As above with one ymm per step, the maxima kept with the top bit flipped
// so that signed compares order them as unsigned.
struct RepMaxAcc {
  __m256i v[4];
};

inline __m256i RepMaxFlip() {
  return _mm256_set1_epi64x(static_cast<long long>(uint64_t{1} << 63));
}

inline RepMaxAcc RepMaxAccInit() {
  // The flipped form of 0, the smallest unsigned value.
  const __m256i low = RepMaxFlip();
  return RepMaxAcc{{low, low, low, low}};
}

inline RepMaxAcc RepMaxFold(RepMaxAcc acc,
                            const uint64_t (*rows)[kRepMaxLanes]) {
  const __m256i flip = RepMaxFlip();
  const auto fold = [&](__m256i m, int t) {
    const __m256i x = _mm256_xor_si256(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(rows[t])), flip);
    return _mm256_blendv_epi8(m, x, _mm256_cmpgt_epi64(x, m));
  };
  // Written out: as a loop, GCC keeps the maxima in memory.
  acc.v[0] = fold(fold(acc.v[0], 0), 4);
  acc.v[1] = fold(fold(acc.v[1], 1), 5);
  acc.v[2] = fold(fold(acc.v[2], 2), 6);
  acc.v[3] = fold(fold(acc.v[3], 3), 7);
  return acc;
}

inline void RepMaxLaneMax(const RepMaxAcc& acc, uint64_t* out) {
  const auto larger = [](__m256i a, __m256i b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
  };
  const __m256i m =
      larger(larger(acc.v[0], acc.v[1]), larger(acc.v[2], acc.v[3]));
  _mm256_store_si256(reinterpret_cast<__m256i*>(out),
                     _mm256_xor_si256(m, RepMaxFlip()));
}

#endif

// One step of the four lanes at step t, stored into out[t]. The shift-add
// is one `lea` on the lane's own register, written out: left to itself the
// compiler packs the lanes into a vector for the shift-add (paying more to
// move the table entries in than it saves), or rotates the hashes through
// extra registers with a move per step.
#define CHUNKD_REPMAX_LANE(h, p, t)                      \
  do {                                                   \
    const uint64_t entry = gear[p[t]];                   \
    __asm__("lea (%1,%0,2), %0" : "+r"(h) : "r"(entry)); \
  } while (0)
#define CHUNKD_REPMAX_STEP(t)      \
  do {                             \
    CHUNKD_REPMAX_LANE(h0, p0, t); \
    CHUNKD_REPMAX_LANE(h1, p1, t); \
    CHUNKD_REPMAX_LANE(h2, p2, t); \
    CHUNKD_REPMAX_LANE(h3, p3, t); \
    out[t][0] = h0;                \
    out[t][1] = h1;                \
    out[t][2] = h2;                \
    out[t][3] = h3;                \
  } while (0)

inline void RepMaxCdcBody(const uint8_t* data, size_t begin, size_t end,
                          const uint64_t* gear, uint64_t* max) {
  if (begin >= end) return;
  constexpr size_t K = kRepMaxLanes;
  const size_t lane_groups = (end - begin) / 64 / K;
  if (lane_groups < kRepMaxMinLaneGroups) {
    RepMaxCdcRoll(data, begin, end, gear, RepMaxWarmUp(data, begin, gear), max);
    return;
  }
  const size_t lane_len = 64 * lane_groups;
  const uint8_t* p0 = data + begin;
  const uint8_t* p1 = p0 + lane_len;
  const uint8_t* p2 = p1 + lane_len;
  const uint8_t* p3 = p2 + lane_len;
  uint64_t h0 = RepMaxWarmUp(data, begin, gear);
  uint64_t h1 = RepMaxWarmUp(data, begin + lane_len, gear);
  uint64_t h2 = RepMaxWarmUp(data, begin + 2 * lane_len, gear);
  uint64_t h3 = RepMaxWarmUp(data, begin + 3 * lane_len, gear);
  // Group g rolls into block[g & 1] while block[(g + 1) & 1], group g - 1,
  // is folded; the fold of the first group's pass reads the zeroed block
  // and is dropped.
  alignas(64) uint64_t block[2][64][K];
  memset(block[1], 0, sizeof(block[1]));
  alignas(32) uint64_t lane_max[K];
  for (size_t g = 0; g < lane_groups; ++g) {
    uint64_t(*const out)[K] = block[g & 1];
    const uint64_t(*const prev)[K] = block[(g + 1) & 1];
    RepMaxAcc acc = RepMaxAccInit();
    for (int t0 = 0; t0 < 64; t0 += 8) {
      CHUNKD_REPMAX_STEP(t0);
      CHUNKD_REPMAX_STEP(t0 + 1);
      CHUNKD_REPMAX_STEP(t0 + 2);
      CHUNKD_REPMAX_STEP(t0 + 3);
      CHUNKD_REPMAX_STEP(t0 + 4);
      CHUNKD_REPMAX_STEP(t0 + 5);
      CHUNKD_REPMAX_STEP(t0 + 6);
      CHUNKD_REPMAX_STEP(t0 + 7);
      acc = RepMaxFold(acc, prev + t0);
    }
    if (g > 0) {
      RepMaxLaneMax(acc, lane_max);
      for (size_t l = 0; l < K; ++l) max[l * lane_groups + g - 1] = lane_max[l];
    }
    p0 += 64;
    p1 += 64;
    p2 += 64;
    p3 += 64;
  }
  // The last group's block, folded alone.
  RepMaxAcc acc = RepMaxAccInit();
  for (int t0 = 0; t0 < 64; t0 += 8) {
    acc = RepMaxFold(acc, block[(lane_groups - 1) & 1] + t0);
  }
  RepMaxLaneMax(acc, lane_max);
  for (size_t l = 0; l < K; ++l) {
    max[l * lane_groups + lane_groups - 1] = lane_max[l];
  }
  // The last lane ended where the rest begins: its hash continues there.
  RepMaxCdcRoll(data, begin + K * lane_len, end, gear, h3,
                max + K * lane_groups);
}

#undef CHUNKD_REPMAX_STEP
#undef CHUNKD_REPMAX_LANE

#endif  // CHUNKD_KERNEL_SET_SCALAR
