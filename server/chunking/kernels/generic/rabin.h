// rabin, stage-1 bodies (definition in ../functions.h; README.md): the
// scalar definition, and restic's rolling digest in kRabinLanes interleaved
// scalar lanes.
//
// One digest is a long dependency chain per byte — XOR the leaving byte's
// out entry, shift the top byte out, load its mod entry, XOR — about eight
// cycles. Independent lanes, consecutive word-aligned pieces of the range,
// let the core overlap them; each lane starts from the digest of the 64
// bytes before its first position (64 warm-up slides from a zero digest), so
// every step of every lane removes the byte 64 back and appends one.
//
// Six lanes measure fastest (seven spill). A slide is then bound by its four
// loads (the byte in, the byte leaving, the out and mod entries), not by the
// chain. On AVX-512, taking the two bytes and the out entry off the scalar
// loop — E(p) = out8[leaving] ^ in computed 64 positions at a time from
// vpermi2b byte planes, then d' = (d << 8) ^ mod[d >> 45] ^ E(p) — measured
// slower: the shuffles cost more than the loads they save. Gathers for both
// lookups would at best gain about a fifth (docs/algorithms/rabin.md).
//
// Output: with a mask of kRabinSparseMinBits or more bits (every average of
// 1 KiB and up) a candidate is rare, so the words are zeroed once and each
// lane tests its digest behind a well-predicted branch. Otherwise every
// position's bit is collected into whole words.
//
// Positions below 64 have windows that reach before data[0] (slid in from a
// zero window); a range starting there takes the scalar kernel for its first
// word, so the lanes never look before data[0].
//
// Cost per call: 64 slides of warm-up per lane, no other setup.

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void RabinBody(const uint8_t* data, size_t begin, size_t end,
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

#else  // the vector kernel sets

inline constexpr int kRabinLanes = 6;
inline constexpr int kRabinSparseMinBits = 10;
// restic's polShift for degree 53: the digest's top byte after a shift.
inline constexpr int kRabinTopShift = 53 - 8;

// One slide in restic's form: remove `leaving`, append `in`, reduce. The
// tables come as pointers the caller holds in registers (a reference to
// RabinParams would be reloaded after every call the loop might make).
inline uint64_t RabinSlide(const uint64_t* out, const uint64_t* mod, uint64_t d,
                           uint8_t leaving, uint8_t in) {
  d ^= out[leaving];
  return ((d << 8) | in) ^ mod[d >> kRabinTopShift];
}

// The digest of data[pos - 64, pos): appending to a zero digest removes
// nothing (out[0] == 0). REQUIRES: pos >= 64.
inline uint64_t RabinWarmUp(const uint8_t* data, size_t pos,
                            const RabinParams& params) {
  uint64_t d = 0;
  for (size_t q = pos - 64; q < pos; ++q) {
    d = ((d << 8) | data[q]) ^ params.mod[d >> kRabinTopShift];
  }
  return d;
}

// Rolls one lane over [from, to) from digest `d` of the 64 bytes before
// `from`; rel0 is from's bit offset in the output (a multiple of 64 unless
// kSparse, whose words are already zeroed).
template <bool kSparse>
inline void RabinTail(const uint8_t* data, size_t from, size_t to,
                      const RabinParams& params, uint64_t d, size_t rel0,
                      uint64_t* hits) {
  const uint64_t* const out = params.out;
  const uint64_t* const mod = params.mod;
  const uint64_t mask = params.mask;
  if (kSparse) {
    for (size_t p = from; p < to; ++p) {
      d = RabinSlide(out, mod, d, data[p - 64], data[p]);
      if (__builtin_expect((d & mask) == 0, 0)) {
        const size_t rel = rel0 + (p - from);
        hits[rel / 64] |= uint64_t{1} << (rel % 64);
      }
    }
    return;
  }
  uint64_t word = 0;
  size_t w = rel0 / 64;
  unsigned bit = 0;
  for (size_t p = from; p < to; ++p) {
    d = RabinSlide(out, mod, d, data[p - 64], data[p]);
    word |= uint64_t{(d & mask) == 0} << bit;
    if (++bit == 64) {
      hits[w++] = word;
      word = 0;
      bit = 0;
    }
  }
  if (bit != 0) hits[w] = word;
}

// The index 64 bytes before lane step t: the byte leaving the window (a lane
// starts 64 bytes or more into the data).
inline ptrdiff_t Back(size_t t) { return static_cast<ptrdiff_t>(t) - 64; }

// Sets bit `rel` (rare).
__attribute__((noinline, cold)) inline void RabinSetHit(uint64_t* hits,
                                                        size_t rel) {
  hits[rel / 64] |= uint64_t{1} << (rel % 64);
}

// K lanes over [begin, end), each lane_len long or cut short by `end` (so
// the last is shorter, and on ranges of fewer than K (K - 1) words the last
// ones may be empty). A plain value.
template <int K>
struct RabinLaneSplit {
  size_t lane_words = 0;
  size_t lane_len = 0;
  size_t common_len = 0;  // steps every lane has
  const uint8_t* lane[K] = {};
  uint64_t d[K] = {};  // the digest before each lane's first position

  RabinLaneSplit(const uint8_t* data, size_t begin, size_t end,
                 const RabinParams& params) {
    lane_words = CeilDiv(CeilDiv(end - begin, 64), K);
    lane_len = 64 * lane_words;
    common_len = end - Min(begin + (K - 1) * lane_len, end);
#pragma GCC unroll 8
    for (int l = 0; l < K; ++l) {
      const size_t start = Min(begin + l * lane_len, end);
      lane[l] = data + start;
      d[l] = start < end ? RabinWarmUp(data, start, params) : 0;
    }
  }
};

// Each lane from step t to its end, one at a time: what the lanes do not
// share, at most K - 1 words per lane on ranges of K (K - 1) words or more.
template <bool kSparse, int K>
inline void RabinTails(const uint8_t* data, size_t begin, size_t end,
                       const RabinParams& params, const RabinLaneSplit<K>& s,
                       const uint64_t (&d)[K], size_t t, uint64_t* hits) {
  // Unrolled, so that the caller's digests stay scalars (in registers).
#pragma GCC unroll 8
  for (int l = 0; l < K; ++l) {
    const size_t from = Min(begin + l * s.lane_len + t, end);
    const size_t to = Min(begin + (l + 1) * s.lane_len, end);
    RabinTail<kSparse>(data, from, to, params, d[l], l * s.lane_len + t, hits);
  }
}

// REQUIRES: 64 <= begin < end.
template <bool kSparse>
void RabinLanes(const uint8_t* data, size_t begin, size_t end,
                const RabinParams& params, uint64_t* hits) {
  constexpr int K = kRabinLanes;
  const uint64_t* const out = params.out;
  const uint64_t* const mod = params.mod;
  const uint64_t mask = params.mask;
  if (kSparse) memset(hits, 0, CeilDiv(end - begin, 64) * 8);
  const RabinLaneSplit<K> split(data, begin, end, params);
  const uint8_t* lane[K];
  uint64_t d[K];
#pragma GCC unroll 8
  for (int l = 0; l < K; ++l) {
    lane[l] = split.lane[l];
    d[l] = split.d[l];
  }
  size_t t = 0;
  if (kSparse) {
    for (; t < split.common_len; ++t) {
      for (int l = 0; l < K; ++l) {
        d[l] = RabinSlide(out, mod, d[l], lane[l][Back(t)], lane[l][t]);
        if (__builtin_expect((d[l] & mask) == 0, 0)) {
          RabinSetHit(hits, l * split.lane_len + t);
        }
      }
    }
  } else {
    // Whole words here (common_len is a multiple of 64 unless the last lane
    // ends at `end`), the remainder in the tails.
    for (; t + 64 <= split.common_len; t += 64) {
      uint64_t bits[K] = {};
      for (unsigned bit = 0; bit < 64; ++bit) {
        for (int l = 0; l < K; ++l) {
          d[l] = RabinSlide(out, mod, d[l], lane[l][Back(t + bit)],
                            lane[l][t + bit]);
          bits[l] |= uint64_t{(d[l] & mask) == 0} << bit;
        }
      }
      for (int l = 0; l < K; ++l) hits[l * split.lane_words + t / 64] = bits[l];
    }
  }
  RabinTails<kSparse>(data, begin, end, params, split, d, t, hits);
}

inline void RabinBody(const uint8_t* data, size_t begin, size_t end,
                      const RabinParams& params, uint64_t* hits) {
  if (begin >= end) return;
  if (begin < 64) {
    // The first word: windows that reach before data[0].
    const size_t first_end = Min(end, begin + 64);
    scalar::Rabin(data, begin, first_end, params, hits);  // baseline code
    begin = first_end;
    ++hits;
    if (begin >= end) return;
  }
  if (__builtin_popcountll(params.mask) >= kRabinSparseMinBits) {
    RabinLanes<true>(data, begin, end, params, hits);
  } else {
    RabinLanes<false>(data, begin, end, params, hits);
  }
}

#endif  // CHUNKD_KERNEL_SET_SCALAR
