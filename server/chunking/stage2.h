// Stage 2 of the two-stage engine (SS-CDC; docs/design.md, "Stage 2: cut
// points"): the selectors that find a chunk's cut point from the stage-1
// bitmaps (chunking/kernels/functions.h) and return exactly what the
// algorithm's reference cutter (<algorithm>.h) returns — length and hash.
// An algorithm's driver (drivers/<algorithm>_driver.cc) calls one of these
// or has its own.
//
// A selector sees the chunk's bytes and a bit source: Get(which, pos) returns
// the bits of bitmap `which` for the 64 stream positions [pos, pos + 64),
// position pos in bit 0 (a source may also offer FindFirst, see there). The
// engine has two sources: a window of bitmaps computed ahead (the two-stage
// strategy) and short blocks computed on demand from the chunk's minimum
// size on (the sequential-scan strategy). A selector asks only for positions
// in [chunk start, chunk start + min(avail, max)); bits at or beyond that end
// may be garbage and are masked off here.
//
// What each selector does, and why it equals its reference:
//
// fastcdc. Bit k of the Gear hash depends on the last k + 1 bytes only and
// the highest mask bit is 47, so once the restarted hash has seen 64 bytes it
// *is* the windowed hash W(p) of the bitmaps. The selector therefore rolls the
// restarted hash itself over the first 64 positions after the restart at
// m = 2 * (min / 2), then looks for the first set bit in hits_s on
// [m + 64, c) and in hits_l on [max(m + 64, c), e), a word at a time, where
// c = 2 * (center / 2) and e = 2 * (remaining / 2) are the crate's pair-loop
// limits (center = avg, or remaining when remaining < avg; remaining capped at
// max; remaining <= min is one chunk with hash 0; an odd limit leaves the last
// byte untested). The reported hash is the crate's: at a cut at an odd offset
// the hash H(p); at an even offset 2 * H(p) (the two-bytes-at-a-time loop
// holds the doubled value there); without a cut H at the last odd offset
// examined (0 when no pair was examined). From 64 bytes after the restart on,
// H(p) = W(p) is recomputed from the 64 bytes ending at p.
//
// The first candidate (SelectFirstCandidate), for the algorithms whose
// bitmap bit at p is the candidate test itself (a window that is
// stream-global or lies inside the chunk wherever it is tested): the chunk
// ends after the first candidate at or after the offset the driver gives,
// else at min(avail, max). The hash at a candidate is the window's, which
// the driver recomputes once per chunk.
//
// seqcdc. The authors' state machine reads two facts per byte — greater or
// less than the previous byte — which are the gt/lt bitmaps; "supporting"
// steps are gt in increasing mode and lt in decreasing mode, "opposing" ones
// the other bitmap, equal bytes neither. Per 64 positions the selector finds
// (a) where the opposing counter reaches SkipTrigger: the (trigger - count)th
// opposing bit, by select; (b) the first point where the run of supporting
// steps since the last opposing step reaches SeqLength, where equal bytes are
// transparent: for the stretch before the word's first opposing bit the run
// carried in from before counts too; later stretches lie inside the word and
// are found by looking for SeqLength set bits in a row of ~opposing (a stretch
// cannot hold SeqLength supporting steps in fewer positions) and then counting
// the supporting bits of that stretch. Whichever of (a) and (b) comes first
// wins: a cut, or a jump of SkipSize bytes past the triggering byte with the
// counter reset (the run is already 0 after an opposing step). Without either,
// the counters absorb the word (popcounts) and the scan moves 64 positions on.
// Jumps may land anywhere, also mid-word or past the end; the cap is
// size = min(avail, max), and the end of the stream is the same cap.
//
// Thread safety: the parameter structs are immutable; selectors are pure
// functions of their arguments and the source.
#ifndef CHUNKD_CHUNKING_STAGE2_H_
#define CHUNKD_CHUNKING_STAGE2_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>


namespace chunkd::chunking::stage2 {

// The cut a selector found: the chunk's length and the algorithm's hash at
// the cut (Chunk::hash).
struct Cut {
  size_t length = 0;
  uint64_t hash = 0;
};

// Which bitmap a source returns: functions.h fills, in this order,
// (hits_s, hits_l), (hits), (gt, lt).
inline constexpr int kFirst = 0;
inline constexpr int kSecond = 1;

// ---------------------------------------------------------------------------
// Bit helpers (baseline x86-64: no BMI2).

// REQUIRES: x != 0 (bsf / bsr are baseline).
inline int CountTrailingZeros(uint64_t x) { return __builtin_ctzll(x); }
inline int HighestBit(uint64_t x) { return 63 - __builtin_clzll(x); }

// Set bits of x. Baseline x86-64 has no POPCNT, and __builtin_popcountll
// would call libgcc there; the SWAR sum is a dozen inline instructions.
inline int PopCount(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555);
  x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F;
  return static_cast<int>((x * 0x0101010101010101) >> 56);
}

// Bits [0, n) set; n in [0, 64].
inline uint64_t LowMask(size_t n) {
  return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
}

namespace internal {
// kSelectInByte[b][k]: position of the k-th set bit (from 0) of byte b.
struct SelectTable {
  std::array<std::array<uint8_t, 8>, 256> at{};
  constexpr SelectTable() {
    for (int b = 0; b < 256; ++b) {
      int k = 0;
      for (int i = 0; i < 8; ++i) {
        if ((b >> i) & 1) at[b][k++] = static_cast<uint8_t>(i);
      }
    }
  }
};
inline constexpr SelectTable kSelectInByte{};
}  // namespace internal

// Position of the k-th set bit (k from 0) of x. REQUIRES: k < PopCount(x).
// Broadword: per-byte popcounts, their prefix sums by one multiplication, the
// byte holding the bit by a parallel compare, then a table for the byte.
inline int Select64(uint64_t x, int k) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  uint64_t s = x - ((x >> 1) & 0x5555555555555555);
  s = (s & 0x3333333333333333) + ((s >> 2) & 0x3333333333333333);
  s = (s + (s >> 4)) & 0x0F0F0F0F0F0F0F0F;
  const uint64_t prefix = s * kOnes;  // byte i: set bits in bytes 0..i
  // Bytes whose prefix exceeds k get their top bit set (prefixes <= 64).
  const uint64_t above =
      ((prefix | (kOnes << 7)) - kOnes * static_cast<uint64_t>(k + 1)) &
      (kOnes << 7);
  const int byte = CountTrailingZeros(above) / 8;
  const int before =
      byte == 0 ? 0 : static_cast<int>((prefix >> (8 * byte - 8)) & 0xFF);
  return 8 * byte +
         internal::kSelectInByte.at[(x >> (8 * byte)) & 0xFF][k - before];
}

// Bits [rel, rel + 64) of a bitmap stored LSB first in `words`.
// REQUIRES: words[rel / 64 + 1] is readable when rel % 64 != 0.
inline uint64_t BitsAt(const uint64_t* words, size_t rel) {
  const size_t w = rel / 64;
  const unsigned b = rel % 64;
  if (b == 0) return words[w];
  return (words[w] >> b) | (words[w + 1] << (64 - b));
}

// First set bit in stream positions [lo, hi) of a bitmap kept in a ring of
// words, or hi: position origin + 64 g + b is bit b of words[g & mask]
// (mask: the ring size minus one, a power of two of at least 8 words minus
// one; ~0 for a plain array). Reads only the words that hold [lo, hi). Aligned
// words, eight at a time while they are all zero: stage 2's bitmaps are sparse
// (crc32 and FastCDC's mask_s: one bit in avg_size or more), so this is most of
// its work.
inline uint64_t FindFirstInWords(const uint64_t* words, uint64_t mask,
                                 uint64_t origin, uint64_t lo, uint64_t hi) {
  if (lo >= hi) return hi;
  constexpr uint64_t kBlock = 8;
  uint64_t g = (lo - origin) / 64;
  const uint64_t last = (hi - 1 - origin) / 64;  // the last word to look at
  uint64_t bits = words[g & mask] & ~LowMask((lo - origin) % 64);
  for (;;) {
    if (g == last) {
      bits &= LowMask((hi - 1 - origin) % 64 + 1);
      return bits == 0 ? hi : origin + 64 * g + CountTrailingZeros(bits);
    }
    if (bits != 0) return origin + 64 * g + CountTrailingZeros(bits);
    ++g;
    // Blocks that end before the last word and do not wrap around the ring.
    while (g + kBlock <= last && (g & mask) <= mask - (kBlock - 1)) {
      const uint64_t* q = words + (g & mask);
      if ((q[0] | q[1] | q[2] | q[3] | q[4] | q[5] | q[6] | q[7]) != 0) break;
      g += kBlock;
    }
    bits = words[g & mask];
  }
}

namespace internal {
template <class Source, class = void>
struct HasFindFirst : std::false_type {};
template <class Source>
struct HasFindFirst<Source,
                    std::void_t<decltype(std::declval<Source&>().FindFirst(
                        0, uint64_t{0}, uint64_t{0}))>> : std::true_type {};
}  // namespace internal

// First set bit of bitmap `which` in stream positions [lo, hi), or hi: the
// source's own FindFirst(which, lo, hi) when it has one (the engine's ring of
// words, FindFirstInWords), else a word at a time through Get.
template <class Source>
inline uint64_t FindFirst(Source& source, int which, uint64_t lo, uint64_t hi) {
  if constexpr (internal::HasFindFirst<Source>::value) {
    return source.FindFirst(which, lo, hi);
  } else {
    for (uint64_t p = lo; p < hi; p += 64) {
      uint64_t w = source.Get(which, p);
      if (hi - p < 64) w &= LowMask(hi - p);
      if (w != 0) return p + CountTrailingZeros(w);
    }
    return hi;
  }
}

// ---------------------------------------------------------------------------
// fastcdc

struct FastCdcParams {
  size_t min_size = 0;
  size_t avg_size = 0;
  size_t max_size = 0;
  uint64_t mask_s = 0;
  uint64_t mask_l = 0;
  const uint64_t* gear = nullptr;  // 256 entries, seeded

  // The Gear hash of the 64 bytes ending at `last` (W(p) of functions.h).
  uint64_t Window64(const uint8_t* last) const {
    uint64_t h = 0;
    for (const uint8_t* b = last - 63; b <= last; ++b) h = (h << 1) + gear[*b];
    return h;
  }
};

// REQUIRES: chunk[0, min(avail, max_size)) readable; source covers stream
// positions [chunk_pos, chunk_pos + min(avail, max_size)) with the fastcdc
// bitmaps.
template <class Source>
Cut SelectFastCdc(const FastCdcParams& f, const uint8_t* chunk,
                  uint64_t chunk_pos, size_t avail, Source& source) {
  size_t remaining = avail;
  if (remaining <= f.min_size) return {remaining, 0};
  size_t center = f.avg_size;
  if (remaining > f.max_size) {
    remaining = f.max_size;
  } else if (remaining < center) {
    center = remaining;
  }
  const size_t m = f.min_size & ~size_t{1};  // the restart, even
  const size_t c = center & ~size_t{1};      // mask_s before, mask_l from here
  const size_t e = remaining & ~size_t{1};   // end of the pair loops
  // The first 64 positions: the restarted hash has seen fewer than 64 bytes,
  // so the bitmaps (windowed over bytes before m) do not apply.
  const size_t direct_end = std::min(e, m + 64);
  uint64_t h = 0;
  for (size_t a = m; a < direct_end; ++a) {
    h = (h << 1) + f.gear[chunk[a]];
    if ((h & (a < c ? f.mask_s : f.mask_l)) == 0) {
      return {a, (a & 1) != 0 ? h : h << 1};
    }
  }
  // h is the hash at direct_end - 1, an odd offset: the crate's value when
  // the loops end there (e == m: no pair examined, h == 0).
  if (direct_end == e) return {remaining, h};
  const uint64_t lo = chunk_pos + direct_end;
  const uint64_t mid = chunk_pos + std::max(c, direct_end);
  const uint64_t hi = chunk_pos + e;
  uint64_t hit = FindFirst(source, kFirst, lo, mid);
  if (hit == mid) hit = FindFirst(source, kSecond, mid, hi);
  if (hit == hi) return {remaining, f.Window64(chunk + e - 1)};
  const size_t a = static_cast<size_t>(hit - chunk_pos);
  const uint64_t w = f.Window64(chunk + a);
  return {a, (a & 1) != 0 ? w : w << 1};
}

// ---------------------------------------------------------------------------
// The first candidate

// Where a chunk ends for the algorithms that cut after their first
// candidate: at the first set bit of the bitmap at chunk offset `first` or
// later, within min(avail, max_size); without one, min(avail, max_size)
// bytes on. A chunk of at most `first` bytes is the rest of the stream.
// `first` is the driver's (e.g. min_size - 1 where the reference tests a
// candidate from the chunk's min_size-th byte on). A plain value.
struct FirstCandidate {
  size_t length = 0;       // of the chunk
  bool candidate = false;  // it ends at a candidate, its last byte
};

// REQUIRES: max_size >= first; source covers [chunk_pos + first,
// chunk_pos + min(avail, max_size)) with the bitmap.
template <class Source>
FirstCandidate SelectFirstCandidate(uint64_t chunk_pos, size_t avail,
                                    size_t first, size_t max_size,
                                    Source& source) {
  if (avail <= first) return {avail, false};
  const size_t limit = std::min(avail, max_size);
  const uint64_t hi = chunk_pos + limit;
  const uint64_t hit = FindFirst(source, kFirst, chunk_pos + first, hi);
  if (hit == hi) return {limit, false};
  return {static_cast<size_t>(hit - chunk_pos) + 1, true};
}

// ---------------------------------------------------------------------------
// seqcdc

struct SeqCdcParams {
  bool increasing = true;
  size_t min_size = 0;
  size_t max_size = 0;
  uint32_t seq_length = 0;
  uint32_t skip_trigger = 0;
  size_t skip_size = 0;
};

namespace internal {

// Positions j where x has `length` set bits in a row ending at j, counting
// only bits inside the word (zeros shift in below bit 0). length >= 1.
inline uint64_t RunsOfAtLeast(uint64_t x, uint32_t length) {
  if (length > 64) return 0;
  uint32_t have = 1;  // x marks runs of at least `have`
  while (have * 2 <= length) {
    x &= x << have;
    have *= 2;
  }
  if (have < length) x &= x << (length - have);
  return x;
}

// The first position < limit where the run of supporting steps reaches
// `length`, or 64. `sup` and `opp` are the word's supporting and opposing
// bits (disjoint); `run` supporting steps precede the word since the last
// opposing step (run < length).
inline int FirstRunEnd(uint64_t sup, uint64_t opp, uint32_t run,
                       uint32_t length, int limit) {
  // The stretch before the first opposing bit continues the carried run.
  const int first_opp = opp != 0 ? CountTrailingZeros(opp) : 64;
  const uint64_t head = sup & LowMask(static_cast<size_t>(first_opp));
  const uint32_t in_head = static_cast<uint32_t>(PopCount(head));
  if (run + in_head >= length) {
    const int j = Select64(head, static_cast<int>(length - run - 1));
    return j < limit ? j : 64;
  }
  if (first_opp >= 63 || length >= 64) return 64;
  // Later stretches lie between opposing bits inside the word. One holding
  // `length` supporting steps spans at least `length` positions free of
  // opposing bits; only those stretches are counted.
  uint64_t candidates = RunsOfAtLeast(~opp, length) & ~LowMask(first_opp + 1);
  while (candidates != 0) {
    const int j = CountTrailingZeros(candidates);
    // The stretch around j: after the last opposing bit below j, up to the
    // next opposing bit (or the word's end).
    const int start = HighestBit(opp & LowMask(static_cast<size_t>(j))) + 1;
    if (start > limit) return 64;  // past the jump: never examined
    const uint64_t after = opp >> j;
    const int end = after != 0 ? j + CountTrailingZeros(after) : 64;
    const uint64_t stretch = sup & LowMask(static_cast<size_t>(end)) &
                             ~LowMask(static_cast<size_t>(start));
    if (static_cast<uint32_t>(PopCount(stretch)) >= length) {
      const int cut = Select64(stretch, static_cast<int>(length - 1));
      return cut < limit ? cut : 64;
    }
    candidates &= ~LowMask(static_cast<size_t>(end));
  }
  return 64;
}

}  // namespace internal

// REQUIRES: source covers [chunk_pos + min_size, chunk_pos + min(avail,
// max_size)) with the seqcdc bitmaps (gt first, lt second).
template <class Source>
Cut SelectSeqCdc(const SeqCdcParams& q, uint64_t chunk_pos, size_t avail,
                 Source& source) {
  if (avail < q.min_size) return {avail, 0};
  const size_t size = std::min(avail, q.max_size);
  const int sup_map = q.increasing ? kFirst : kSecond;
  const int opp_map = q.increasing ? kSecond : kFirst;
  size_t pos = q.min_size;  // next position examined, from the chunk start
  uint32_t run = 0;
  uint32_t opposing = 0;
  while (pos < size) {
    uint64_t sup = source.Get(sup_map, chunk_pos + pos);
    uint64_t opp = source.Get(opp_map, chunk_pos + pos);
    const size_t n = std::min<size_t>(64, size - pos);
    if (n < 64) {
      sup &= LowMask(n);
      opp &= LowMask(n);
    }
    // (a) The opposing step that triggers a jump, if in this word.
    const uint32_t need = q.skip_trigger - opposing;  // >= 1
    const uint32_t opp_count = static_cast<uint32_t>(PopCount(opp));
    const int jump =
        opp_count >= need ? Select64(opp, static_cast<int>(need - 1)) : 64;
    // (b) The first completed run before it.
    const int cut = internal::FirstRunEnd(sup, opp, run, q.seq_length, jump);
    if (cut < 64) return {pos + static_cast<size_t>(cut), 0};
    if (jump < 64) {
      pos += static_cast<size_t>(jump) + 1 + q.skip_size;
      opposing = 0;
      run = 0;  // the triggering step was opposing
      continue;
    }
    opposing += opp_count;
    run = opp != 0 ? static_cast<uint32_t>(PopCount(sup >> HighestBit(opp)))
                   : run + static_cast<uint32_t>(PopCount(sup));
    pos += n;
  }
  return {size, 0};
}

}  // namespace chunkd::chunking::stage2

#endif  // CHUNKD_CHUNKING_STAGE2_H_
