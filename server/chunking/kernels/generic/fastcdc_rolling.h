// fastcdc, generic rolling body: the Gear hash rolled byte by byte in
// kRollLanes interleaved scalar lanes.
//
// A single rolling hash is bound by its dependency chain (one shift-add per
// byte); independent lanes — consecutive word-aligned pieces of the range,
// each with its own 63 bytes of warm-up — let the core overlap them. Table
// lookups stay scalar loads: on current x86 cores a gather of eight 64-bit
// entries costs more than eight loads, and AVX2 has nothing better for a
// 256-entry table of 64-bit values.
//
// Output: when mask_s & mask_l has enough bits (all MASKS pairs of 1 KiB
// averages and up), a position rarely passes even the bits both masks share,
// so the words are zeroed once and the rare candidates set one by one behind
// a well-predicted branch. Otherwise every position's two bits are collected
// into whole words.
//
// Cost per call: 63 positions of warm-up per non-empty lane, no other setup.

// Three lanes: their hashes, bytes and pointers still fit the 15 general
// registers; a fourth lane spills and gains nothing.
inline constexpr int kRollLanes = 3;
// Below this many bits in mask_s & mask_l, collect bits instead of branching.
inline constexpr int kRollSparseMinBits = 10;

// Rolls [begin, end) of one lane, starting from hash `h` of the position
// before `begin`; rel0 is begin's bit offset in the output.
template <bool kSparse>
inline void RollTail(const uint8_t* data, size_t begin, size_t end,
                     const GearParams& params, uint64_t h, size_t rel0,
                     uint64_t* hits_s, uint64_t* hits_l) {
  const uint64_t* const gear = params.gear;
  if (kSparse) {
    const uint64_t common = params.mask_s & params.mask_l;
    for (size_t p = begin; p < end; ++p) {
      h = (h << 1) + gear[data[p]];
      if ((h & common) == 0) {
        const size_t rel = rel0 + (p - begin);
        hits_s[rel / 64] |= uint64_t{(h & params.mask_s) == 0} << (rel % 64);
        hits_l[rel / 64] |= uint64_t{(h & params.mask_l) == 0} << (rel % 64);
      }
    }
    return;
  }
  // rel0 is a multiple of 64 here (lanes start on words).
  uint64_t ws = 0, wl = 0;
  size_t w = rel0 / 64;
  unsigned bit = 0;
  for (size_t p = begin; p < end; ++p) {
    h = (h << 1) + gear[data[p]];
    ws |= uint64_t{(h & params.mask_s) == 0} << bit;
    wl |= uint64_t{(h & params.mask_l) == 0} << bit;
    if (++bit == 64) {
      hits_s[w] = ws;
      hits_l[w] = wl;
      ++w;
      ws = wl = 0;
      bit = 0;
    }
  }
  if (bit != 0) {
    hits_s[w] = ws;
    hits_l[w] = wl;
  }
}

// The hashes of the lanes, passed by value so that the hot loop never has
// to keep them in memory for the rare call below.
struct RollHashes {
  uint64_t h[kRollLanes];
};

inline RollHashes Pack(const uint64_t (&h)[kRollLanes]) {
  RollHashes r;
  for (int l = 0; l < kRollLanes; ++l) r.h[l] = h[l];
  return r;
}

// Sets the bits of every lane's hash at lane step t (rare).
__attribute__((noinline, cold)) inline void RollHits(RollHashes hashes,
                                                     size_t t, size_t lane_len,
                                                     const GearParams& params,
                                                     uint64_t* hits_s,
                                                     uint64_t* hits_l) {
  for (int l = 0; l < kRollLanes; ++l) {
    const uint64_t h = hashes.h[l];
    const size_t rel = l * lane_len + t;
    hits_s[rel / 64] |= uint64_t{(h & params.mask_s) == 0} << (rel % 64);
    hits_l[rel / 64] |= uint64_t{(h & params.mask_l) == 0} << (rel % 64);
  }
}

inline uint64_t GearWarmUp(const uint8_t* data, size_t pos,
                           const uint64_t* gear) {
  uint64_t h = 0;
  for (size_t q = pos >= 63 ? pos - 63 : 0; q < pos; ++q) {
    h = (h << 1) + gear[data[q]];
  }
  return h;
}

template <bool kSparse>
void FastCdcRollingLanes(const uint8_t* data, size_t begin, size_t end,
                         const GearParams& params, uint64_t* hits_s,
                         uint64_t* hits_l) {
  constexpr int K = kRollLanes;
  const uint64_t* const gear = params.gear;
  const size_t n = end - begin;
  const size_t words = CeilDiv(n, 64);
  if (kSparse) {
    memset(hits_s, 0, words * 8);
    memset(hits_l, 0, words * 8);
  }
  const size_t lane_words = CeilDiv(words, K);
  const size_t lane_len = 64 * lane_words;
  // Lanes 0..K-2 are lane_len long; the last one may be shorter (or empty).
  const size_t last_start = Min(begin + (K - 1) * lane_len, end);
  const size_t common_len = end - last_start;  // steps all K lanes share
  uint64_t h[K];
  size_t start[K];
  for (int l = 0; l < K; ++l) {
    start[l] = Min(begin + l * lane_len, end);
    // An empty lane (short ranges) needs no warm-up.
    h[l] = start[l] < end ? GearWarmUp(data, start[l], gear) : 0;
  }
  const uint64_t ms = params.mask_s, ml = params.mask_l;
  const uint64_t common = ms & ml;
  if (kSparse) {
    // 8 bytes of every lane per 64-bit load (table loads are the limit),
    // one combined branch per step for the K lanes.
    const uint8_t* lane[K];
    for (int l = 0; l < K; ++l) lane[l] = data + start[l];
    size_t t = 0;
    for (; t + 8 <= common_len; t += 8) {
      uint64_t x[K];
      for (int l = 0; l < K; ++l) memcpy(&x[l], lane[l] + t, 8);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        bool any = false;
        for (int l = 0; l < K; ++l) {
          h[l] = (h[l] << 1) + gear[x[l] & 0xFF];
          x[l] >>= 8;
          // Keep each lane in a general register: otherwise the compiler
          // packs the lanes into a ymm register for the shift-add and pays
          // more for moving the table values in and out than it saves.
          __asm__("" : "+r"(h[l]));
          any |= (h[l] & common) == 0;
        }
        if (any) {
          RollHits(Pack(h), t + j, lane_len, params, hits_s, hits_l);
        }
      }
    }
    for (; t < common_len; ++t) {
      bool any = false;
      for (int l = 0; l < K; ++l) {
        h[l] = (h[l] << 1) + gear[lane[l][t]];
        any |= (h[l] & common) == 0;
      }
      if (any) {
        RollHits(Pack(h), t, lane_len, params, hits_s, hits_l);
      }
    }
  } else {
    // common_len is a multiple of 64 unless the last lane ends at `end`;
    // whole words here, the remainder in RollTail.
    const size_t whole = common_len / 64 * 64;
    for (size_t t0 = 0; t0 < whole; t0 += 64) {
      uint64_t ws[K] = {}, wl[K] = {};
      for (unsigned bit = 0; bit < 64; ++bit) {
        for (int l = 0; l < K; ++l) {
          const uint64_t v = (h[l] << 1) + gear[data[start[l] + t0 + bit]];
          h[l] = v;
          ws[l] |= uint64_t{(v & ms) == 0} << bit;
          wl[l] |= uint64_t{(v & ml) == 0} << bit;
        }
      }
      for (int l = 0; l < K; ++l) {
        const size_t w = l * lane_words + t0 / 64;
        hits_s[w] = ws[l];
        hits_l[w] = wl[l];
      }
    }
    for (int l = 0; l < K; ++l) {
      const size_t lane_end = Min(start[l] + lane_len, end);
      RollTail<false>(data, start[l] + whole, lane_end, params, h[l],
                      l * lane_len + whole, hits_s, hits_l);
    }
    return;
  }
  for (int l = 0; l < K; ++l) {
    const size_t lane_end = Min(start[l] + lane_len, end);
    RollTail<true>(data, start[l] + common_len, lane_end, params, h[l],
                   l * lane_len + common_len, hits_s, hits_l);
  }
}

inline int PopCount64(uint64_t x) { return __builtin_popcountll(x); }

inline void FastCdcRollingGeneric(const uint8_t* data, size_t begin, size_t end,
                                  const GearParams& params, uint64_t* hits_s,
                                  uint64_t* hits_l) {
  if (begin >= end) return;
  if (PopCount64(params.mask_s & params.mask_l) >= kRollSparseMinBits) {
    FastCdcRollingLanes<true>(data, begin, end, params, hits_s, hits_l);
  } else {
    FastCdcRollingLanes<false>(data, begin, end, params, hits_s, hits_l);
  }
}
