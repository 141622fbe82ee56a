// SHA-256 (FIPS 180-4) with the x86 SHA extensions, several messages at once.
//
// Compiled with -msha -msse4.1 -mssse3 (CMakeLists.txt); called only after
// fingerprint/sha256_mb.cc has checked the CPU. Nothing here may be shared
// with baseline code: every symbol is in this file's namespace, and no
// template or inline function of another header is instantiated.
//
// Why several messages: each sha256rnds2 (two rounds) needs the result of
// the one before, so one message runs at the instruction's latency, not its
// throughput. Rounds of independent messages do not wait for each other, so
// K lanes interleaved round by round keep the SHA unit busy up to K times as
// often.
//
// State layout of the SHA instructions: the eight working variables a..h are
// kept in two registers, ABEF (dwords 3..0 = a, b, e, f) and CDGH (c, d, g,
// h). sha256rnds2(cdgh, abef, wk) runs two rounds with the message+constant
// words in dwords 0 and 1 of wk and returns the new ABEF; after two rounds
// the new CDGH is the old ABEF.
#include "fingerprint/shani/sha256_shani.h"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chunkd::fingerprint::shani {
namespace {

// FIPS 180-4 §4.2.2: the round constants.
alignas(16) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// FIPS 180-4 §5.3.3: the initial hash value H(0), words a..h.
constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr size_t kBlock = 64;

// Byte order within each 32-bit word reversed: message words and digest
// words are big-endian.
inline __m128i SwapMask() {
  return _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
}

inline __m128i Set4(uint32_t w3, uint32_t w2, uint32_t w1, uint32_t w0) {
  return _mm_set_epi32(static_cast<int>(w3), static_cast<int>(w2),
                       static_cast<int>(w1), static_cast<int>(w0));
}

// One message in progress.
struct Lane {
  __m128i abef;
  __m128i cdgh;
  const unsigned char* next;  // its next block
  size_t blocks;              // blocks left at `next`
  size_t tail_blocks;         // 1 or 2
  bool in_tail;               // `next` points into `tail`
  const Job* job;
  // The message's last size % 64 bytes, then the padding: 0x80, zeros, the
  // length in bits as a 64-bit big-endian number (FIPS 180-4 §5.1.1).
  alignas(16) unsigned char tail[2 * kBlock];
};

void Start(Lane* lane, const Job* job) {
  lane->job = job;
  lane->abef = Set4(kInit[0], kInit[1], kInit[4], kInit[5]);
  lane->cdgh = Set4(kInit[2], kInit[3], kInit[6], kInit[7]);
  const size_t full = job->size / kBlock;
  const size_t rest = job->size % kBlock;
  if (rest > 0) std::memcpy(lane->tail, job->data + full * kBlock, rest);
  lane->tail[rest] = 0x80;
  const size_t tail_size = rest < kBlock - 8 ? kBlock : 2 * kBlock;
  std::memset(lane->tail + rest + 1, 0, tail_size - 8 - rest - 1);
  const uint64_t bits = static_cast<uint64_t>(job->size) << 3;
  for (int i = 0; i < 8; ++i) {
    lane->tail[tail_size - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  }
  lane->tail_blocks = tail_size / kBlock;
  if (full > 0) {
    lane->next = job->data;
    lane->blocks = full;
    lane->in_tail = false;
  } else {
    lane->next = lane->tail;
    lane->blocks = lane->tail_blocks;
    lane->in_tail = true;
  }
}

// ABEF and CDGH back to a..h, each word big-endian.
void Finish(const Lane& lane) {
  const __m128i swap = SwapMask();
  const __m128i abef_r = _mm_shuffle_epi32(lane.abef, 0x1b);  // a b e f
  const __m128i ghcd = _mm_shuffle_epi32(lane.cdgh, 0xb1);    // g h c d
  const __m128i abcd = _mm_blend_epi16(abef_r, ghcd, 0xf0);
  const __m128i efgh = _mm_alignr_epi8(ghcd, abef_r, 8);
  unsigned char* out = lane.job->digest;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm_shuffle_epi8(abcd, swap));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16),
                   _mm_shuffle_epi8(efgh, swap));
}

// The message schedule of quarter q (rounds 4q..4q+3, q >= 4) in w[q % 4],
// which held quarter q - 4: W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) +
// W[t-16] for its four t. msg1 adds s0 of the following words to W[t-16],
// the alignr supplies W[t-7], msg2 adds s1 (of the words it computes itself
// for the upper two).
__attribute__((always_inline)) inline void Schedule(__m128i* w, int q) {
  const __m128i t16 = w[q & 3];
  const __m128i t12 = w[(q + 1) & 3];
  const __m128i t8 = w[(q + 2) & 3];
  const __m128i t4 = w[(q + 3) & 3];
  __m128i x = _mm_sha256msg1_epu32(t16, t12);
  x = _mm_add_epi32(x, _mm_alignr_epi8(t4, t8, 4));
  w[q & 3] = _mm_sha256msg2_epu32(x, t4);
}

// `n` blocks of each of the K lanes, their rounds interleaved. The loops
// over lanes and quarters are unrolled, so every array below lives in
// registers (or the compiler's spill slots).
template <int K>
__attribute__((always_inline)) inline void RunBlocks(Lane* const* lanes,
                                                     size_t n) {
  const __m128i swap = SwapMask();
  __m128i abef[K];
  __m128i cdgh[K];
  const unsigned char* p[K];
#pragma GCC unroll 4
  for (int l = 0; l < K; ++l) {
    abef[l] = lanes[l]->abef;
    cdgh[l] = lanes[l]->cdgh;
    p[l] = lanes[l]->next;
  }
  for (size_t b = 0; b < n; ++b) {
    __m128i abef_in[K];
    __m128i cdgh_in[K];
    // The message schedule, four words per register, rotating: at quarter q
    // (rounds 4q..4q+3), w[l][q % 4] holds W[4q..4q+3].
    __m128i w[K][4];
#pragma GCC unroll 4
    for (int l = 0; l < K; ++l) {
      abef_in[l] = abef[l];
      cdgh_in[l] = cdgh[l];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        w[l][i] = _mm_shuffle_epi8(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[l] + 16 * i)),
            swap);
      }
      p[l] += kBlock;
    }
    // Where the schedule of quarter r is computed: with one or two lanes at
    // the start of quarter r, with more lanes between the two halves of
    // quarter r - 1, filling the wait for the first half's results. Each
    // measured best for its lane counts on Zen 4 (two lanes 1.52x OpenSSL
    // against 1.43x; four 1.78x against 1.72x).
    constexpr bool kEarly = K >= 3;
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) {
      const __m128i k =
          _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * q));
      if (!kEarly && q >= 4) {
#pragma GCC unroll 4
        for (int l = 0; l < K; ++l) Schedule(w[l], q);
      }
      // The first two rounds of every lane, then the second two.
      __m128i wk[K];
#pragma GCC unroll 4
      for (int l = 0; l < K; ++l) {
        wk[l] = _mm_add_epi32(w[l][q & 3], k);
        cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], wk[l]);
      }
      if (kEarly && q >= 3 && q < 15) {
#pragma GCC unroll 4
        for (int l = 0; l < K; ++l) Schedule(w[l], q + 1);
      }
#pragma GCC unroll 4
      for (int l = 0; l < K; ++l) {
        abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l],
                                        _mm_shuffle_epi32(wk[l], 0x0e));
      }
    }
#pragma GCC unroll 4
    for (int l = 0; l < K; ++l) {
      abef[l] = _mm_add_epi32(abef[l], abef_in[l]);
      cdgh[l] = _mm_add_epi32(cdgh[l], cdgh_in[l]);
    }
  }
#pragma GCC unroll 4
  for (int l = 0; l < K; ++l) {
    lanes[l]->abef = abef[l];
    lanes[l]->cdgh = cdgh[l];
  }
}

__attribute__((noinline)) void Run1(Lane* const* lanes, size_t n) {
  RunBlocks<1>(lanes, n);
}
__attribute__((noinline)) void Run2(Lane* const* lanes, size_t n) {
  RunBlocks<2>(lanes, n);
}
__attribute__((noinline)) void Run3(Lane* const* lanes, size_t n) {
  RunBlocks<3>(lanes, n);
}
__attribute__((noinline)) void Run4(Lane* const* lanes, size_t n) {
  RunBlocks<4>(lanes, n);
}

}  // namespace

void HashJobs(const Job* jobs, size_t count, int lanes) {
  if (lanes < 1) lanes = 1;
  if (lanes > kMaxLanes) lanes = kMaxLanes;
  Lane lane[kMaxLanes];
  Lane* idle[kMaxLanes];
  Lane* active[kMaxLanes];
  int idle_count = 0;
  int active_count = 0;
  for (int i = 0; i < lanes; ++i) idle[idle_count++] = &lane[i];
  size_t next_job = 0;
  while (true) {
    while (idle_count > 0 && next_job < count) {
      Lane* l = idle[--idle_count];
      Start(l, &jobs[next_job++]);
      active[active_count++] = l;
    }
    if (active_count == 0) return;
    // Run every lane up to the nearest end of a lane's contiguous blocks.
    size_t n = active[0]->blocks;
    for (int i = 1; i < active_count; ++i) {
      if (active[i]->blocks < n) n = active[i]->blocks;
    }
    switch (active_count) {
      case 1:
        Run1(active, n);
        break;
      case 2:
        Run2(active, n);
        break;
      case 3:
        Run3(active, n);
        break;
      default:
        Run4(active, n);
        break;
    }
    int kept = 0;
    for (int i = 0; i < active_count; ++i) {
      Lane* l = active[i];
      l->next += n * kBlock;
      l->blocks -= n;
      if (l->blocks == 0) {
        if (l->in_tail) {
          Finish(*l);
          idle[idle_count++] = l;
          continue;
        }
        l->in_tail = true;
        l->next = l->tail;
        l->blocks = l->tail_blocks;
      }
      active[kept++] = l;
    }
    active_count = kept;
  }
}

}  // namespace chunkd::fingerprint::shani
