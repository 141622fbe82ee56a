// Stage 1 of the two-stage engine (SS-CDC; docs/design.md, "Stage 1: candidate bitmaps"): per-byte predicate
// bitmaps of each algorithm (functions.h), computed by one kernel per
// instruction set, their detection, and a kernel forced by name (--backend,
// CHUNKD_BACKEND). Without one, the engine chooses per algorithm by
// calibration (chunking/auto_kernel.h).
//
// Every kernel must produce exactly the bits of the scalar kernel, which
// follows the definitions of functions.h literally; the differential test
// enforces it.
//
// Thread safety: kernels are pure functions; the table is immutable.
#ifndef CHUNKD_CHUNKING_KERNELS_KERNELS_H_
#define CHUNKD_CHUNKING_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunking/kernels/functions.h"

namespace chunkd::chunking::kernels {

// One backend: an instruction set's stage-1 functions. The table's entries
// are constant and every function is pure, so a Kernel may be used from any
// thread. No defaults: kernels come from AllKernels() and FindKernel()
// (tests build their own, e.g. wrapping another's functions).
struct Kernel {
  // "scalar", "avx2", "avx512": the folder, namespace, flag value and metric
  // label of this instruction set (kernels/CMakeLists.txt lists them).
  const char* name;

  // True when this CPU and OS can run the kernel (cpuid + xgetbv).
  bool (*supported)();

  // One pointer per row of CHUNKD_KERNEL_FUNCTIONS (functions.h), in its
  // order: fastcdc, crc32, seqcdc, rabin, buzhash, repmaxcdc.
#define CHUNKD_KERNEL_MEMBER(Function, member, parameters, unused) \
  void(*member) parameters;
  CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_MEMBER, _)
#undef CHUNKD_KERNEL_MEMBER
};

// Words needed for the bitmap of n positions.
inline constexpr size_t BitmapWords(size_t n) { return (n + 63) / 64; }

// Every kernel built into this binary, best first: avx512, avx2, scalar.
absl::Span<const Kernel* const> AllKernels();

// The scalar kernel: always built, always supported; the reference.
const Kernel& ScalarKernel();

// The widest kernel this CPU supports: the automatic choice when its
// calibration could not run (chunking/auto_kernel.h).
const Kernel& BestKernel();

// The kernel named `name` (as from --backend or CHUNKD_BACKEND).
// INVALID_ARGUMENT for an unknown name (listing the known ones),
// FAILED_PRECONDITION when this CPU or OS cannot run it. Never falls back.
absl::StatusOr<const Kernel*> FindKernel(absl::string_view name);

// The kernel forced by the environment: CHUNKD_BACKEND's when it is set and
// not empty (an error if it names an unknown or unsupported kernel), else
// nullptr — no kernel forced, the engine chooses one per algorithm and
// thread count (chunking/auto_kernel.h).
absl::StatusOr<const Kernel*> ForcedKernel();

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_KERNELS_H_
