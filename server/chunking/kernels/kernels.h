// Stage 1 of the two-stage engine (SS-CDC; DESIGN.md §3): per-byte predicate
// bitmaps of each algorithm, computed by one kernel per instruction set.
//
// A kernel fills bitmaps for the positions [begin, end) of a buffer `data`.
// Bit (p - begin) % 64 of word (p - begin) / 64 (least significant bit
// first) belongs to position p. Every word that covers [begin, end) is
// written in full; bits for positions >= end are zero. Windows reach back
// from p into data[0..p) — never before data[0] — so a caller either starts
// the buffer at the stream's first byte or passes a begin with enough bytes
// of left context before it (fastcdc 63, crc32 255, seqcdc 1). Kernels are
// pure functions of their inputs: any split of [begin, end) into pieces gives
// the same bits, which is what lets segments run on different threads.
//
// Every kernel must produce exactly the bits of the scalar kernel, which
// follows the definitions below literally; the differential test enforces it.
//
// Thread safety: kernels are pure functions; the table is immutable.
#ifndef CHUNKD_CHUNKING_KERNELS_KERNELS_H_
#define CHUNKD_CHUNKING_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::chunking::kernels {

// FastCDC's Gear parameters: the seeded one-byte table and the two masks.
struct GearParams {
  const uint64_t* gear = nullptr;  // 256 entries, seed already applied
  uint64_t mask_s = 0;
  uint64_t mask_l = 0;
};

struct Kernel {
  // "scalar", "avx2", "avx512": the folder, namespace, flag value and metric
  // label of this instruction set.
  const char* name;

  // True when this CPU and OS can run the kernel (cpuid + xgetbv).
  bool (*supported)();

  // fastcdc: with the windowed Gear hash
  //   W(p) = sum over i in [0, min(63, p)] of gear[data[p - i]] << i (mod 2^64)
  // sets bit p in hits_s when (W(p) & mask_s) == 0 and in hits_l when
  // (W(p) & mask_l) == 0. W(p) equals the crate's rolled hash at p once that
  // hash has seen at least 64 bytes (bit k depends on the last k + 1 bytes
  // only); stage 2 recomputes the first 64 positions after each restart.
  void (*fastcdc)(const uint8_t* data, size_t begin, size_t end,
                  const GearParams& params, uint64_t* hits_s,
                  uint64_t* hits_l);

  // crc32: sets bit p when (C(p) & mask) == 0, C(p) being the CRC-32
  // (reflected 0xEDB88320, initial 0, no final XOR) of data[max(0, p - 255),
  // p] — the 256-byte window of DESIGN.md §2 (mask = avg_size - 1).
  void (*crc32)(const uint8_t* data, size_t begin, size_t end, uint32_t mask,
                uint64_t* hits);

  // seqcdc: sets bit p in gt when data[p] > data[p - 1] and in lt when
  // data[p] < data[p - 1]; position 0 has neither.
  void (*seqcdc)(const uint8_t* data, size_t begin, size_t end, uint64_t* gt,
                 uint64_t* lt);
};

// Words needed for the bitmap of n positions.
inline constexpr size_t BitmapWords(size_t n) { return (n + 63) / 64; }

// Every kernel built into this binary, best first: avx512, avx2, scalar.
absl::Span<const Kernel* const> AllKernels();

// The scalar kernel: always built, always supported; the reference.
const Kernel& ScalarKernel();

// The best kernel this CPU supports.
const Kernel& BestKernel();

// The kernel named `name` (as from --backend or CHUNKD_BACKEND).
// INVALID_ARGUMENT for an unknown name (listing the known ones),
// FAILED_PRECONDITION when this CPU or OS cannot run it. Never falls back.
absl::StatusOr<const Kernel*> FindKernel(absl::string_view name);

// The kernel to use by default: CHUNKD_BACKEND when set (an error if it
// names an unknown or unsupported kernel), else BestKernel().
absl::StatusOr<const Kernel*> DefaultKernel();

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_KERNELS_H_
