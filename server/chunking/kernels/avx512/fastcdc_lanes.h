// fastcdc's avx512 body (generic/fastcdc.h includes it inside the avx512
// kernel set's namespace, after fastcdc_rolling.h, its fallback).

namespace {

// FastCdcLanes: the range is cut into 8 * G lanes of whole bitmap words, and
// every lane rolls its own Gear hash, h' = 2h + gear[byte], one byte per step
// — a single vpmadd52luq per eight lanes (h' = gear + h * 2). IFMA keeps 52
// bits exactly; every MASKS entry lies below bit 48, and a lane that has
// rolled at least 48 bytes has the bits 0..47 of W(p) exactly (bit k depends
// on the last k + 1 bytes). So each lane starts kWarm = 48 bytes before its
// first position. Masks with bits at 48 or above take the rolling kernel.
//
// Lookups: the low six bytes of the 256 Gear entries are split into six
// 256-byte planes (4 zmm each, built per call). vpermi2b looks up 64 bytes of
// a plane at once; two of them, masked by the index's top bit, cover 256
// entries. Three rounds of unpacks turn the six planes into the 64-bit table
// values of 64 positions: 8 steps x 8 lanes, one zmm per step. The data
// bytes are transposed into that order (8 lanes x 64 bytes per block),
// pre-permuted so that the unpacks land every lane in its qword.
//
// Output: with mask_s & mask_l of kSparseMinBits or more bits (all MASKS
// pairs of avg >= 1 KiB), a masked vptestmq per step on the shared bits
// (one branch per 8 steps) rejects nearly everything; the rare survivor
// recomputes its 8 steps and sets its bits in words zeroed beforehand.
// Otherwise both masks are tested every step, the 8-bit lane masks stored
// per step and bit-transposed into lane words per block (GF2P8AFFINEQB),
// each word straddling two blocks because of the 48-byte offset.
//
// Cost per 64 positions: 12 vpermi2b, 22 unpacks, 8 vpmadd52luq, 8 tests and
// ~5 for the transposition: the vector ports are the limit. Per call:
// building the planes (~160 instructions), then per tile 48 warm-up steps of
// every lane (2.3%). Ranges below kLanesMinRange positions, where that
// warm-up dominates, take the rolling kernel.

// The group and step loops must be unrolled so that the hashes stay in
// registers rather than in arrays indexed at run time.
#define CHUNKD_UNROLL _Pragma("GCC unroll 8")

constexpr int kWarm = 48;
// The planes hold bits 0..47 of the table: masks must lie below bit 48.
constexpr int kMaxMaskBit = 47;
constexpr int kSparseMinBits = 10;
// Long ranges are cut into tiles of 8 * G lanes of kTileLaneWords words
// each: a tile's bytes (32 KiB) stay in L1 while its lanes run, and the next
// tile is prefetched meanwhile, so memory sees one sequential stream instead
// of 8 * G. Each tile costs kWarm steps of warm-up per lane (2.3%).
constexpr size_t kTileLaneWords = 32;
constexpr size_t kLanesMinRange = 1024;
// Two groups of 8 lanes hide vpmadd52luq's latency; below this many words
// the warm-up of 16 lanes costs more than it hides.
constexpr size_t kTwoGroupsMinWords = 128;

struct GearPlanes {
  Vec t[6][4];  // plane j, entries 64c .. 64c + 63
};

void BuildGearPlanes(const uint64_t* gear, GearPlanes* planes) {
  const Vec bytes = LoadIndex(kByteTranspose8x8);
  for (int c = 0; c < 4; ++c) {
    Vec r[8];
    for (int m = 0; m < 8; ++m) {
      // qword j: byte j of entries 64c + 8m + 0..7
      r[m] = _mm512_permutexvar_epi8(bytes,
                                     _mm512_loadu_si512(gear + 64 * c + 8 * m));
    }
    Transpose8x8Qwords(r);  // r[j]: byte j of entries 64c .. 64c + 63
    for (int j = 0; j < 6; ++j) planes->t[j][c] = r[j];
  }
}

// Where the transposition puts byte s (step) of lane l: the unpacks of
// LookupSteps then bring it to qword l of step vector s.
alignas(64) constexpr uint8_t kLaneOrder[64] = {
    // index 16 * (l >> 1) + 2 * s + (l & 1) holds 8 * l + s
    0,  8,  1,  9,  2,  10, 3,  11, 4,  12, 5,  13, 6,  14, 7,  15,
    16, 24, 17, 25, 18, 26, 19, 27, 20, 28, 21, 29, 22, 30, 23, 31,
    32, 40, 33, 41, 34, 42, 35, 43, 36, 44, 37, 45, 38, 46, 39, 47,
    48, 56, 49, 57, 50, 58, 51, 59, 52, 60, 53, 61, 54, 62, 55, 63};

// gear[] (low 48 bits) of the 64 bytes of idx, as 8 vectors of 8 qwords.
inline void LookupSteps(const GearPlanes& planes, Vec idx, Vec q[8]) {
  // vpermi2b covers 128 entries; two of them cover 256 without a blend:
  // the first, masked to the indices >= 128, leaves the other bytes as
  // they were — their index — for the second, masked the other way.
  const __mmask64 high = _mm512_movepi8_mask(idx);
  Vec p[6];
  for (int j = 0; j < 6; ++j) {
    const Vec upper = _mm512_mask2_permutex2var_epi8(planes.t[j][2], idx, high,
                                                     planes.t[j][3]);
    p[j] = _mm512_mask2_permutex2var_epi8(planes.t[j][0], upper, ~high,
                                          planes.t[j][1]);
  }
  const Vec zero = _mm512_setzero_si512();
  const Vec a01l = _mm512_unpacklo_epi8(p[0], p[1]);
  const Vec a01h = _mm512_unpackhi_epi8(p[0], p[1]);
  const Vec a23l = _mm512_unpacklo_epi8(p[2], p[3]);
  const Vec a23h = _mm512_unpackhi_epi8(p[2], p[3]);
  const Vec a45l = _mm512_unpacklo_epi8(p[4], p[5]);
  const Vec a45h = _mm512_unpackhi_epi8(p[4], p[5]);
  const Vec b[4] = {
      _mm512_unpacklo_epi16(a01l, a23l), _mm512_unpackhi_epi16(a01l, a23l),
      _mm512_unpacklo_epi16(a01h, a23h), _mm512_unpackhi_epi16(a01h, a23h)};
  const Vec c[4] = {
      _mm512_unpacklo_epi16(a45l, zero), _mm512_unpackhi_epi16(a45l, zero),
      _mm512_unpacklo_epi16(a45h, zero), _mm512_unpackhi_epi16(a45h, zero)};
  for (int i = 0; i < 4; ++i) {
    q[2 * i] = _mm512_unpacklo_epi32(b[i], c[i]);
    q[2 * i + 1] = _mm512_unpackhi_epi32(b[i], c[i]);
  }
}

struct LaneGeometry {
  const uint8_t* data;
  size_t begin;     // the tile: output positions [begin, begin + n)
  size_t end;       // readable bytes: data[0, end)
  size_t prefetch;  // distance to the same lane position of the next tile
  size_t n;
  size_t words;
  size_t lane_words;
  size_t lane_len;
  size_t active;
};

// Sets the candidate bits of one sub-block (8 steps) of group g, the first
// at lane step `step`, recomputing its hashes from `w` (the hash before it)
// and its bytes `idx`. Rare: only sub-blocks where some lane passed the bits
// both masks share, so the hot loop keeps nothing else alive for it.
__attribute__((noinline, cold)) void ScatterHits(
    const LaneGeometry& geo, const GearPlanes& planes, int g, size_t step,
    Vec w, Vec idx, Vec ms, Vec ml, uint64_t* hits_s, uint64_t* hits_l) {
  Vec q[8];
  LookupSteps(planes, idx, q);
  for (int s = 0; s < 8; ++s) {
    w = _mm512_madd52lo_epu64(q[s], w, _mm512_set1_epi64(2));
    const unsigned ks = _mm512_testn_epi64_mask(w, ms);
    const unsigned kl = _mm512_testn_epi64_mask(w, ml);
    if ((ks | kl) == 0) continue;
    for (int i = 0; i < 8; ++i) {
      const size_t rel = (8 * g + i) * geo.lane_len + step + s - kWarm;
      if (rel >= geo.n) continue;
      hits_s[rel / 64] |= uint64_t{(ks >> i) & 1} << (rel % 64);
      hits_l[rel / 64] |= uint64_t{(kl >> i) & 1} << (rel % 64);
    }
  }
}

// FastCdcLanes is split into the helpers below, all inlined into it: one
// function for the compiler, so that the hashes stay in registers.
#define CHUNKD_INLINE __attribute__((always_inline)) inline

// The 64 bytes of block b of lane `lane` (transposed by the caller), from
// the data when they lie inside it, else through `bounce`.
CHUNKD_INLINE Vec LoadLane(const LaneGeometry& geo, size_t lane, size_t b,
                           uint8_t* bounce) {
  const ptrdiff_t pos =
      static_cast<ptrdiff_t>(geo.begin + lane * geo.lane_len + 64 * b) - kWarm;
  if (lane < geo.active && Inside(pos, 64, geo.end)) {
    const Vec r = _mm512_loadu_si512(geo.data + pos);
    // The lanes of the next tile, while this one runs from L1.
    if (pos + geo.prefetch < geo.end) {
      _mm_prefetch(reinterpret_cast<const char*>(geo.data + pos + geo.prefetch),
                   _MM_HINT_T0);
    }
    return r;
  }
  if (lane < geo.active) {
    CopyClamped(geo.data, pos, 64, geo.end, bounce);
  } else {
    memset(bounce, 0, 64);
  }
  return _mm512_load_si512(bounce);
}

// Loads and transposes block b of every lane: steps[g][k] holds the bytes of
// steps 8k..8k+7 of the lanes of group g, in LookupSteps' order.
template <int G>
CHUNKD_INLINE void LoadBlock(const LaneGeometry& geo, size_t b,
                             uint8_t (*bounce)[64], Vec (*steps)[8]) {
  const Vec order = LoadIndex(kLaneOrder);
  for (int g = 0; g < G; ++g) {
    Vec r[8];
    for (int i = 0; i < 8; ++i) r[i] = LoadLane(geo, 8 * g + i, b, bounce[i]);
    Transpose8x8Qwords(r);  // r[k] qword i: lane 8g+i, steps 8k..8k+7
    for (int k = 0; k < 8; ++k) {
      steps[g][k] = _mm512_permutexvar_epi8(order, r[k]);
    }
  }
}

// The first kWarm steps of block 0: rolled without testing. Lane 0's hash
// stays 0 for its first lane0_void steps, which lie before data[0].
template <int G>
CHUNKD_INLINE void WarmUp(const GearPlanes& planes, const Vec (*steps)[8],
                          size_t lane0_void, Vec* w) {
  const Vec two = _mm512_set1_epi64(2);
  for (int k = 0; k < kWarm / 8; ++k) {
    for (int g = 0; g < G; ++g) {
      Vec q[8];
      LookupSteps(planes, steps[g][k], q);
      for (int s = 0; s < 8; ++s) {
        w[g] = _mm512_madd52lo_epu64(q[s], w[g], two);
        if (g == 0 && static_cast<size_t>(8 * k + s) < lane0_void) {
          w[0] = _mm512_maskz_mov_epi64(0xFE, w[0]);
        }
      }
    }
  }
}

// The masks as vectors: mask_s, mask_l and the bits they share.
struct LaneMasks {
  Vec s;
  Vec l;
  Vec common;
};

// Sparse: 8 steps of group g from lane step `step` on, with one branch.
// `clear` keeps the lanes whose shared bits were nonzero at every step so
// far: one masked vptestmq per step, no separate OR of per-step masks.
CHUNKD_INLINE void SparseSteps(const LaneGeometry& geo,
                               const GearPlanes& planes, const LaneMasks& m,
                               int g, size_t step, const Vec q[8], Vec idx,
                               Vec* w, uint64_t* hits_s, uint64_t* hits_l) {
  const Vec two = _mm512_set1_epi64(2);
  const Vec w0 = *w;
  __mmask8 clear = 0xFF;
  CHUNKD_UNROLL
  for (int s = 0; s < 8; ++s) {
    *w = _mm512_madd52lo_epu64(q[s], *w, two);
    clear = _mm512_mask_test_epi64_mask(clear, *w, m.common);
  }
  if (!_kortestc_mask8_u8(clear, clear)) {
    ScatterHits(geo, planes, g, step, w0, idx, m.s, m.l, hits_s, hits_l);
  }
}

// Dense: 8 steps, their lane masks stored at kbits[8k..8k+7], rows of each
// qword in reverse order for the bit transpose.
CHUNKD_INLINE void DenseSteps(const LaneMasks& m, int k, const Vec q[8], Vec* w,
                              uint8_t* kbits_s, uint8_t* kbits_l) {
  const Vec two = _mm512_set1_epi64(2);
  for (int s = 0; s < 8; ++s) {
    *w = _mm512_madd52lo_epu64(q[s], *w, two);
    kbits_s[8 * k + 7 - s] = _mm512_testn_epi64_mask(*w, m.s);
    kbits_l[8 * k + 7 - s] = _mm512_testn_epi64_mask(*w, m.l);
  }
}

// Dense: the lane words of group g that block b completes. A lane's bits of
// a block (qword i: lane 8g+i, bit t = step 64b + t) straddle two output
// words because of the 48-step offset, so each word joins the previous
// block's bits (prev) with this one's.
CHUNKD_INLINE void StoreDenseWords(const LaneGeometry& geo, int g, size_t b,
                                   const uint8_t* kbits_s,
                                   const uint8_t* kbits_l, Vec* prev_s,
                                   Vec* prev_l, uint64_t* hits_s,
                                   uint64_t* hits_l) {
  const Vec bytes = LoadIndex(kByteTranspose8x8);
  const Vec cur_s = _mm512_permutexvar_epi8(
      bytes, TransposeBitsReversed(_mm512_load_si512(kbits_s)));
  const Vec cur_l = _mm512_permutexvar_epi8(
      bytes, TransposeBitsReversed(_mm512_load_si512(kbits_l)));
  if (b > 0) {
    alignas(64) uint64_t out_s[8], out_l[8];
    _mm512_store_si512(out_s,
                       _mm512_or_si512(_mm512_srli_epi64(*prev_s, kWarm),
                                       _mm512_slli_epi64(cur_s, 64 - kWarm)));
    _mm512_store_si512(out_l,
                       _mm512_or_si512(_mm512_srli_epi64(*prev_l, kWarm),
                                       _mm512_slli_epi64(cur_l, 64 - kWarm)));
    for (int i = 0; i < 8; ++i) {
      const size_t lane = 8 * g + i;
      if (lane >= geo.active) break;
      const size_t word = lane * geo.lane_words + (b - 1);
      if (word >= geo.words) continue;
      const uint64_t keep =
          word + 1 == geo.words ? LowBits(geo.n - 64 * word) : ~uint64_t{0};
      hits_s[word] = out_s[i] & keep;
      hits_l[word] = out_l[i] & keep;
    }
  }
  *prev_s = cur_s;
  *prev_l = cur_l;
}

template <int G, bool kSparse>
void FastCdcLanes(const LaneGeometry& geo, const GearPlanes& planes,
                  const GearParams& params, uint64_t* hits_s,
                  uint64_t* hits_l) {
  LaneMasks m;
  m.s = _mm512_set1_epi64(static_cast<long long>(params.mask_s));
  m.l = _mm512_set1_epi64(static_cast<long long>(params.mask_l));
  m.common =
      _mm512_set1_epi64(static_cast<long long>(params.mask_s & params.mask_l));
  if (kSparse) {
    memset(hits_s, 0, geo.words * 8);
    memset(hits_l, 0, geo.words * 8);
  }
  // Steps of lane 0 before data[0] (begin < kWarm): its hash stays 0 there.
  const size_t lane0_void =
      geo.begin < static_cast<size_t>(kWarm) ? kWarm - geo.begin : 0;
  const size_t blocks = geo.lane_words + 1;  // the last one has 48 steps

  alignas(64) Vec steps[G][8];  // transposed block, per sub-block
  alignas(64) uint8_t bounce[8][64];
  alignas(64) uint8_t kbits_s[G][64] = {};  // dense: lane masks per step
  alignas(64) uint8_t kbits_l[G][64] = {};
  Vec prev_s[G], prev_l[G];
  Vec w[G];
  for (int g = 0; g < G; ++g) {
    w[g] = _mm512_setzero_si512();
    prev_s[g] = prev_l[g] = _mm512_setzero_si512();
  }

  for (size_t b = 0; b < blocks; ++b) {
    LoadBlock<G>(geo, b, bounce, steps);
    if (b == 0) WarmUp<G>(planes, steps, lane0_void, w);
    const int k_begin = b == 0 ? kWarm / 8 : 0;
    const int k_end = b + 1 == blocks ? kWarm / 8 : 8;
    for (int k = k_begin; k < k_end; ++k) {
      CHUNKD_UNROLL
      for (int g = 0; g < G; ++g) {
        Vec q[8];
        LookupSteps(planes, steps[g][k], q);
        if (kSparse) {
          SparseSteps(geo, planes, m, g, 64 * b + 8 * k, q, steps[g][k], &w[g],
                      hits_s, hits_l);
        } else {
          DenseSteps(m, k, q, &w[g], kbits_s[g], kbits_l[g]);
        }
      }
    }
    if (kSparse) continue;
    for (int g = 0; g < G; ++g) {
      StoreDenseWords(geo, g, b, kbits_s[g], kbits_l[g], &prev_s[g], &prev_l[g],
                      hits_s, hits_l);
    }
  }
}

#undef CHUNKD_INLINE

template <int G>
void FastCdcLanesDispatch(const LaneGeometry& geo, const GearPlanes& planes,
                          const GearParams& params, uint64_t* hits_s,
                          uint64_t* hits_l) {
  if (PopCount64(params.mask_s & params.mask_l) >= kSparseMinBits) {
    FastCdcLanes<G, true>(geo, planes, params, hits_s, hits_l);
  } else {
    FastCdcLanes<G, false>(geo, planes, params, hits_s, hits_l);
  }
}

}  // namespace

inline void FastCdcBody(const uint8_t* data, size_t begin, size_t end,
                        const GearParams& params, uint64_t* hits_s,
                        uint64_t* hits_l) {
  if (begin >= end) return;
  const uint64_t any = params.mask_s | params.mask_l;
  const int top_bit = any == 0 ? -1 : 63 - __builtin_clzll(any);
  if (top_bit > kMaxMaskBit || end - begin < kLanesMinRange) {
    FastCdcRollingGeneric(data, begin, end, params, hits_s, hits_l);
    return;
  }
  GearPlanes planes;
  BuildGearPlanes(params.gear, &planes);
  const size_t words = CeilDiv(end - begin, 64);
  const int groups = words >= kTwoGroupsMinWords ? 2 : 1;
  const size_t tile_words = 8 * groups * kTileLaneWords;
  for (size_t w = 0; w < words; w += tile_words) {
    LaneGeometry geo;
    geo.data = data;
    geo.begin = begin + 64 * w;
    geo.end = end;
    geo.prefetch = 64 * tile_words;
    geo.n = Min(end - geo.begin, 64 * tile_words);
    geo.words = CeilDiv(geo.n, 64);
    geo.lane_words = CeilDiv(geo.words, static_cast<size_t>(8 * groups));
    geo.lane_len = 64 * geo.lane_words;
    geo.active = CeilDiv(geo.words, geo.lane_words);
    if (groups == 2) {
      FastCdcLanesDispatch<2>(geo, planes, params, hits_s + w, hits_l + w);
    } else {
      FastCdcLanesDispatch<1>(geo, planes, params, hits_s + w, hits_l + w);
    }
  }
}
