// The stage-1 functions of a kernel set, one per algorithm with a stage 1:
// the one list of them. KernelSet (kernels.h) has a pointer to each and
// every kernel set (kernel_sets.h) defines each, both expanded from
// CHUNKD_KERNEL_FUNCTIONS below; an algorithm's stage 1 is a row there, its
// parameters struct here and its body, <Function>Body, in
// generic/<algorithm>.h (listed in generic/bodies.h).
//
// A function fills bitmaps for the positions [begin, end) of a buffer
// `data`. Bit (p - begin) % 64 of word (p - begin) / 64 (least significant
// bit first) belongs to position p. Every word that covers [begin, end) is
// written in full; bits for positions >= end are zero. Windows reach back
// from p into data[0..p) — never before data[0] — so a caller either starts
// the buffer at the stream's first byte or passes a begin with enough bytes
// of left context before it (fastcdc 63, crc32 255, seqcdc 1, rabin 63,
// buzhash 47, repmaxcdc 63). The functions
// are pure: any split of [begin, end) into pieces gives the same bits, which
// is what lets segments run on different threads.
//
//   fastcdc  with the windowed Gear hash
//              W(p) = sum over i in [0, min(63, p)] of
//                     gear[data[p - i]] << i (mod 2^64)
//            sets bit p in hits_s when (W(p) & mask_s) == 0 and in hits_l
//            when (W(p) & mask_l) == 0. W(p) equals the crate's rolled hash
//            at p once that hash has seen at least 64 bytes (bit k depends on
//            the last k + 1 bytes only); stage 2 recomputes the first 64
//            positions after each restart.
//   crc32    sets bit p when (C(p) & mask) == 0, C(p) being the CRC-32
//            (reflected 0xEDB88320, initial 0, no final XOR) of
//            data[max(0, p - 255), p] — the 256-byte window of crc32
//            (docs/design.md) (mask = avg_size - 1).
//   seqcdc   sets bit p in gt when data[p] > data[p - 1] and in lt when
//            data[p] < data[p - 1]; position 0 has neither.
//   rabin    sets bit p when (D(p) & mask) == 0, D(p) being restic's Rabin
//            digest of the 64-byte window data[max(0, p - 63), p] modulo
//            its polynomial (out and mod are restic's tables).
//   buzhash  sets bit p when H(p) % d == d - 1, H(p) being the buzhash of
//            the 48-byte window data[max(0, p - 47), p]:
//            XOR over i in [0, min(47, p)] of rotl32(table[data[p - i]], i).
//   repmaxcdc  is not a bitmap: word g gets the largest W(p) (fastcdc's
//            windowed Gear hash, unseeded table) over the positions p of
//            group g, [begin + 64 g, min(begin + 64 g + 64, end)), into max.
//            Not where in the group: finding the first occurrence costs the
//            kernels a third of their speed, and stage 2 needs it only for
//            the few groups that hold a new maximum, which it hashes again
//            (docs/algorithms/repmaxcdc.md).
//
// Plain declarations and constants only: the ISA translation units include
// this through kernel_sets.h.
//
// Thread safety: the functions are pure; GearParams is a plain value.
#ifndef CHUNKD_CHUNKING_KERNELS_FUNCTIONS_H_
#define CHUNKD_CHUNKING_KERNELS_FUNCTIONS_H_

#include <cstddef>
#include <cstdint>

namespace chunkd::chunking::kernels {

// FastCDC's Gear parameters: the seeded one-byte table and the two masks. A
// plain value; default: no table, both masks 0.
struct GearParams {
  const uint64_t* gear = nullptr;  // 256 entries, seed already applied
  uint64_t mask_s = 0;
  uint64_t mask_l = 0;
};

// restic's Rabin tables and the candidate mask (avg_size - 1). A plain
// value; default: no tables.
struct RabinParams {
  const uint64_t* out = nullptr;  // 256 entries
  const uint64_t* mod = nullptr;  // 256 entries
  uint64_t mask = 0;
};

// casync's buzhash table and desync's discriminator. A plain value; default:
// no table.
struct BuzhashParams {
  const uint32_t* table = nullptr;  // 256 entries
  uint32_t discriminator = 1;
};

// X(Function, member, parameters, arguments, arg) for every stage-1
// function: its name in a kernel set's namespace, its KernelSet member, its
// parameter list and the same names as an argument list (for the kernel
// sets' definitions, kernel_sets.h); `arg` is passed through to X.
#define CHUNKD_KERNEL_FUNCTIONS(X, arg)                                        \
  X(FastCdc, fastcdc,                                                          \
    (const uint8_t* data, size_t begin, size_t end, const GearParams& params,  \
     uint64_t* hits_s, uint64_t* hits_l),                                      \
    (data, begin, end, params, hits_s, hits_l), arg)                           \
  X(Crc32, crc32,                                                              \
    (const uint8_t* data, size_t begin, size_t end, uint32_t mask,             \
     uint64_t* hits),                                                          \
    (data, begin, end, mask, hits), arg)                                       \
  X(SeqCdc, seqcdc,                                                            \
    (const uint8_t* data, size_t begin, size_t end, uint64_t* gt,              \
     uint64_t* lt),                                                            \
    (data, begin, end, gt, lt), arg)                                           \
  X(Rabin, rabin,                                                              \
    (const uint8_t* data, size_t begin, size_t end, const RabinParams& params, \
     uint64_t* hits),                                                          \
    (data, begin, end, params, hits), arg)                                     \
  X(Buzhash, buzhash,                                                          \
    (const uint8_t* data, size_t begin, size_t end,                            \
     const BuzhashParams& params, uint64_t* hits),                             \
    (data, begin, end, params, hits), arg)                                     \
  X(RepMaxCdc, repmaxcdc,                                                      \
    (const uint8_t* data, size_t begin, size_t end, const uint64_t* gear,      \
     uint64_t* max),                                                           \
    (data, begin, end, gear, max), arg)

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_FUNCTIONS_H_
