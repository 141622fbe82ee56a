// crc32, stage-1 bodies (README.md): the scalar definition, and the rolling
// window CRC in byte planes, one lane per byte of a vector (SS-CDC's lanes,
// 64 with AVX-512 and 32 with AVX2).
//
// The range [begin, end) is cut into kCrcLanes consecutive lanes of whole
// bitmap words; each lane rolls its own CRC, so the lanes are independent and
// advance together, one byte each per step. The 32-bit state of all lanes is
// four vectors, byte plane j holding byte j of every lane's CRC, and one step
//   crc' = T[(crc ^ in) & 0xff] ^ (crc >> 8) ^ OUT[out]
// becomes, with x = S0 ^ in,
//   S0' = T0(x) ^ S1 ^ O0(out)   ...   S3' = T3(x) ^ O3(out),
// Tj and Oj being the linear byte maps of crc32_tables.h. A lane is a
// candidate when (S0 & m0) | ... | (S3 & m3) is zero, mj the bytes of mask.
//
// Data arrive transposed: a block of kCrcLanes steps of all lanes is loaded
// as one row per lane and transposed so that vector t holds every lane's byte
// of step t. The byte leaving the window at step t is the one that entered
// 256 steps earlier, so a ring of the last 256 / kCrcLanes + 1 transposed
// blocks provides it for free. The per-step candidate masks (one bit per
// lane) are transposed back into per-lane bitmap bits at the end of a block.
//
// Warm-up: each lane starts 256 bytes before its first position with a zero
// CRC and rolls those bytes in without dropping any, which yields exactly the
// CRC of the window before its first position. Bytes before data[0] (only for
// the first lane near the stream start) and at or after `end` are read as
// zeros: leading zeros do not change a CRC with initial value 0 and OUT[0] is
// 0, so the truncated windows of the definition come out right.
//
// Cost per call: 256 steps of warm-up for all lanes at once (the work of
// 256 * kCrcLanes positions), independent of the range length; a range of
// n positions then takes n / kCrcLanes + 256 steps. Stack: the ring, about
// 20 KiB with 64 lanes.
//
// Needs from the ISA layer:
//   kCrcLanes, CrcLaneBits (kCrcLanes bits), Vec, VZero(), CrcConsts,
//   MakeCrcConsts(mask), CrcWarmBlock(consts, state, in),
//   CrcRollBlock<kPlanes>(consts, state, in, out, hits),
//   CrcTransposeRows(rows, out, scratch), CrcTransposeHits(hits, lane_bits),
//   PrefetchLine(p).

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void Crc32Body(const uint8_t* data, size_t begin, size_t end,
                      uint32_t mask, uint64_t* hits) {
  const CrcTables& t = kCrcTables;
  // crc = CRC of the window ending just before `begin`, at most 255 bytes, so
  // that adding data[begin] makes it the full window of `begin`.
  uint32_t crc = 0;
  for (size_t q = begin >= kCrcWindow - 1 ? begin - (kCrcWindow - 1) : 0;
       q < begin; ++q) {
    crc = t.byte[(crc ^ data[q]) & 0xFF] ^ (crc >> 8);
  }
  ForEachWord(begin, end, hits, nullptr, [&](size_t p, bool* hit, bool*) {
    crc = t.byte[(crc ^ data[p]) & 0xFF] ^ (crc >> 8);
    // From the second step on the window held 256 bytes: drop the oldest.
    if (p > begin && p >= kCrcWindow) crc ^= t.out[data[p - kCrcWindow]];
    *hit = (crc & mask) == 0;
  });
}

#else  // the vector kernel sets

inline constexpr size_t kCrcWarmBlocks = kCrcWindow / kCrcLanes;
// Bytes ahead of a lane's block to prefetch.
inline constexpr ptrdiff_t kCrcPrefetchAhead = 1024;
inline constexpr size_t kCrcRingBlocks = kCrcWarmBlocks + 1;

// Bits of a lane block at bit offset `rel` (a multiple of kCrcLanes) of the
// bitmap. x86 is little-endian: the low half of a word comes first.
inline void CrcPutBits(uint64_t* words, size_t rel, CrcLaneBits bits) {
  memcpy(reinterpret_cast<uint8_t*>(words) + rel / 8, &bits, sizeof(bits));
}

template <int kPlanes>
void Crc32Lanes(const uint8_t* data, size_t begin, size_t end,
                const CrcConsts& consts, uint64_t* hits) {
  constexpr size_t V = kCrcLanes;
  const size_t n = end - begin;
  const size_t words = CeilDiv(n, 64);
  // An odd number of words per lane: the lanes' rows, lane_len bytes apart,
  // then fall into different L1 sets. With an even count — every segment of
  // a power-of-two length — lane_len is a multiple of 128 and the V rows of
  // a block share few sets (all one set at lane_len = 4096: 64 rows, 8
  // ways), so nearly every row load misses L1; that cost 30-45 % of the
  // kernel's speed (stage1 block:262144 against block:266240 in
  // chunking_bench). The last lane is then up to V words shorter.
  size_t lane_words = CeilDiv(words, V);
  if (lane_words % 2 == 0) ++lane_words;
  const size_t lane_len = 64 * lane_words;
  const size_t active = CeilDiv(words, lane_words);
  const size_t blocks = kCrcWarmBlocks + lane_len / V;

  alignas(64) Vec ring[kCrcRingBlocks][V];
  alignas(64) Vec scratch[V];
  alignas(64) uint8_t bounce[V][V];
  alignas(64) static constexpr uint8_t kZeroRow[V] = {};
  alignas(64) CrcLaneBits step_hits[V];
  alignas(64) CrcLaneBits lane_bits[V];
  Vec state[4] = {VZero(), VZero(), VZero(), VZero()};

  for (size_t b = 0; b < blocks; ++b) {
    const uint8_t* rows[V];
    for (size_t l = 0; l < V; ++l) {
      const ptrdiff_t pos =
          static_cast<ptrdiff_t>(begin + l * lane_len + b * V) -
          static_cast<ptrdiff_t>(kCrcWindow);
      if (l >= active || pos >= static_cast<ptrdiff_t>(end)) {
        rows[l] = kZeroRow;
      } else if (Inside(pos, V, end)) {
        rows[l] = data + pos;
        // kCrcLanes streams at once outrun the hardware prefetchers.
        if (Inside(pos + kCrcPrefetchAhead, 1, end)) {
          PrefetchLine(data + pos + kCrcPrefetchAhead);
        }
      } else {
        CopyClamped(data, pos, V, end, bounce[l]);
        rows[l] = bounce[l];
      }
    }
    Vec* in = ring[b % kCrcRingBlocks];
    CrcTransposeRows(rows, in, scratch);
    if (b < kCrcWarmBlocks) {
      CrcWarmBlock(consts, state, in);
      continue;
    }
    const Vec* out = ring[(b - kCrcWarmBlocks) % kCrcRingBlocks];
    CrcRollBlock<kPlanes>(consts, state, in, out, step_hits);
    CrcTransposeHits(step_hits, lane_bits);
    const size_t done = (b - kCrcWarmBlocks) * V;  // lane positions finished
    for (size_t l = 0; l < active; ++l) {
      const size_t rel = l * lane_len + done;
      if (rel >= words * 64) continue;  // past the last word of the range
      CrcLaneBits bits = lane_bits[l];
      if (rel + V > n)
        bits &= static_cast<CrcLaneBits>(LowBits(n > rel ? n - rel : 0));
      CrcPutBits(hits, rel, bits);
    }
  }
}

// Below this many positions the 256 warm-up steps of the lanes cost more
// than rolling one CRC through the range.
inline constexpr size_t kCrcLanesMinRange = 384;

inline void Crc32Body(const uint8_t* data, size_t begin, size_t end,
                      uint32_t mask, uint64_t* hits) {
  if (begin >= end) return;
  if (end - begin < kCrcLanesMinRange) {
    scalar::Crc32(data, begin, end, mask, hits);  // baseline code: fine
    return;
  }
  const CrcConsts consts = MakeCrcConsts(mask);
  // Test only the byte planes the mask touches (avg <= 4 MiB: at most 3).
  if (mask == 0) {
    Crc32Lanes<0>(data, begin, end, consts, hits);
  } else if (mask <= 0xFF) {
    Crc32Lanes<1>(data, begin, end, consts, hits);
  } else if (mask <= 0xFFFF) {
    Crc32Lanes<2>(data, begin, end, consts, hits);
  } else if (mask <= 0xFFFFFF) {
    Crc32Lanes<3>(data, begin, end, consts, hits);
  } else {
    Crc32Lanes<4>(data, begin, end, consts, hits);
  }
}

#endif  // CHUNKD_KERNEL_SET_SCALAR
