// FastCDC 2020: the reference cut function, byte-exact with the Rust crate
// `fastcdc` (module v2020, `cut` and `FastCDC::with_level_and_seed`), which is
// also REAPI's FAST_CDC_2020 (bazelbuild/remote-apis, FastCdc2020Params).
//
// Paper: W. Xia et al., "The Design of Fast Content-Defined Chunking for Data
// Deduplication Based Storage Systems", IEEE TPDS 31(9), 2020.
//
// The Gear hash rolls `hash = (hash << 1) + GEAR[byte]`, so bit k of the hash
// depends only on the last k + 1 bytes. It restarts at 0 at each chunk's
// min_size offset (cut-point skipping) and a position is a cut point when all
// bits of a mask are zero: the stricter mask_s = MASKS[bits + level] before
// avg_size, the looser mask_l = MASKS[bits - level] after it (normalized
// chunking), bits = round(log2(avg_size)).
//
// "Rolling two bytes each time" (paper §3.7): each loop step consumes two
// bytes, hash = (hash << 2) + GEAR_LS[b0], test against mask << 1, then
// hash += GEAR[b1], test against mask. GEAR_LS[b] = GEAR[b] << 1, so the
// intermediate value is exactly twice the one-byte-at-a-time hash and the cut
// points are the same; but the hash *reported* at an even offset is that
// doubled value, and the crate's public vectors include it, so we keep the
// two-byte loop verbatim. Facts of the crate that shape the chunk list:
//   - remaining <= min_size: the whole remainder is one chunk, hash 0.
//   - remaining > max_size: only the first max_size bytes are looked at.
//   - remaining < avg_size: the mask_s loop ends at `remaining` (the "center"
//     moves), so a short tail is judged with the strict mask only.
//   - The scan starts at byte 2 * (min_size / 2): with an odd min_size a
//     chunk can be min_size - 1 bytes long.
//   - The loops run while index < limit / 2 on byte pairs, so with an odd
//     limit the last byte is never tested; without a hit the chunk is
//     `remaining` long and the hash is the value after the last pair.
//   - A hit at byte a ends the chunk *before* a: the byte whose hash matched
//     starts the next chunk.
//   - GEAR[i] is the first 8 bytes (big-endian) of MD5 of 64 bytes of value i
//     (the crate's examples/table64.rs, after destor's C reference) — not MD5
//     of the single byte i. With a seed, GEAR[i] ^= seed and
//     GEAR_LS[i] ^= seed << 1, which keeps GEAR_LS == GEAR << 1.
//
// Two lanes (CutTwoLanes, the engine's path): the loop above is bound by its
// dependency chain — two dependent operations per byte on the hash. The hash
// at a position depends on its last 64 bytes only, so the bytes to scan can
// be split between two lanes rolled in the same loop: the second one starts
// with the hash of the 64 bytes before it (or of those since the restart at
// min_size, when closer), and a hit in it counts only if the first lane has
// none. Each mask region is scanned in blocks of two lanes (the strict
// region in one block, the loose one in blocks of about the mean distance to
// a hit, so that little of the second lane's work is wasted), what remains
// in one lane. Same cut points and hashes as Cut, which stays the crate's
// loop verbatim as the oracle.
//
// Thread safety: immutable after construction.
#ifndef CHUNKD_CHUNKING_FASTCDC_H_
#define CHUNKD_CHUNKING_FASTCDC_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "chunking/cutter.h"

namespace chunkd::chunking {

// The crate's MASKS, indexed by number of bits; 0..4 are padding, 5 and 25
// only reachable with level 3.
inline constexpr std::array<uint64_t, 26> kFastCdcMasks = {
    0,                   // padding
    0,                   // padding
    0,                   // padding
    0,                   // padding
    0,                   // padding
    0x0000000001804110,  // unused except for NC 3
    0x0000000001803110,  // 64B
    0x0000000018035100,  // 128B
    0x0000001800035300,  // 256B
    0x0000019000353000,  // 512B
    0x0000590003530000,  // 1KB
    0x0000d90003530000,  // 2KB
    0x0000d90103530000,  // 4KB
    0x0000d90303530000,  // 8KB
    0x0000d90313530000,  // 16KB
    0x0000d90f03530000,  // 32KB
    0x0000d90303537000,  // 64KB
    0x0000d90703537000,  // 128KB
    0x0000d90707537000,  // 256KB
    0x0000d91707537000,  // 512KB
    0x0000d91747537000,  // 1MB
    0x0000d91767537000,  // 2MB
    0x0000d93767537000,  // 4MB
    0x0000d93777537000,  // 8MB
    0x0000d93777577000,  // 16MB
    0x0000db3777577000,  // unused except for NC 3
};

// The tables and masks of one mask region of CutTwoLanes (fastcdc.cc).
struct FastCdcRegion {
  const uint64_t* gear = nullptr;
  const uint64_t* gear_ls = nullptr;
  uint64_t mask_even = 0;  // the mask << 1: the crate's hash there is doubled
  uint64_t mask_odd = 0;
  size_t lane = 0;  // bytes per lane, a multiple of 4; 0: one lane only
};

// The unseeded Gear table (see the header comment for how it is derived).
const std::array<uint64_t, 256>& FastCdcGearTable();

// round(log2(value)) as the crate's `logarithm2` (f64 log2, then round), in
// integer arithmetic. 0 for 0.
uint32_t FastCdcLog2Round(uint32_t value);

// FastCDC 2020's cut function, the crate's two-bytes-per-step loops verbatim.
// Thread safety: immutable; Cut may run on any number of threads. No
// defaults: the parameters are the validated options'.
class FastCdcCutter final : public Cutter {
 public:
  // REQUIRES: the parameters pass ValidateOptions (min >= 64, avg in
  // [256, 4 MiB], level <= 3).
  FastCdcCutter(uint32_t min_size, uint32_t avg_size, uint32_t max_size,
                uint32_t level, uint64_t seed);

  // `context` is unused: FastCDC restarts its hash at every chunk's min_size.
  size_t Cut(const uint8_t* chunk_start, size_t avail, size_t context,
             uint64_t* hash) const override;
  size_t max_size() const override { return max_size_; }

  // Exactly Cut's chunk length and *hash, rolled in two lanes (header
  // comment): about 1.5x as fast on one core. REQUIRES: as Cut.
  size_t CutTwoLanes(const uint8_t* chunk_start, size_t avail,
                     uint64_t* hash) const;

  uint64_t mask_s() const { return mask_s_; }
  uint64_t mask_l() const { return mask_l_; }
  const std::array<uint64_t, 256>& gear() const { return gear_; }
  const std::array<uint64_t, 256>& gear_ls() const { return gear_ls_; }

 private:
  size_t min_size_;
  size_t avg_size_;
  size_t max_size_;
  uint64_t mask_s_;
  uint64_t mask_l_;
  uint64_t mask_s_ls_;
  uint64_t mask_l_ls_;
  std::array<uint64_t, 256> gear_;
  std::array<uint64_t, 256> gear_ls_;
  // CutTwoLanes' strict and loose regions (pointing into the tables above).
  FastCdcRegion strict_;
  FastCdcRegion loose_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_FASTCDC_H_
