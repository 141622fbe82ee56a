// Stage 1 of the two-stage engine (SS-CDC; docs/design.md, "Stage 1:
// candidate bitmaps"): per-byte predicate bitmaps of each algorithm
// (functions.h), computed by a kernel — one algorithm's stage-1 function —
// of one kernel set per instruction set (scalar, avx2, avx512), their
// detection, and a kernel set forced by name (the public flag --backend of
// chunkd and chunkctl, $CHUNKD_BACKEND). Without one, the engine chooses per
// algorithm by calibration (chunking/auto_kernel.h).
//
// Every kernel must produce exactly the bits of the scalar set's, which
// follow the definitions of functions.h literally; the differential test
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

// One kernel set: an instruction set's stage-1 functions. The table's
// entries are constant and every function is pure, so a KernelSet may be
// used from any thread. No defaults: kernel sets come from AllKernelSets()
// and FindKernelSet() (tests build their own, e.g. wrapping another's
// functions).
struct KernelSet {
  // "scalar", "avx2", "avx512": the folder, namespace, flag value and metric
  // label of this instruction set (kernels/CMakeLists.txt lists them).
  const char* name;

  // True when this CPU and OS can run the kernel set (cpuid + xgetbv).
  bool (*supported)();

  // One pointer per row of CHUNKD_KERNEL_FUNCTIONS (functions.h), in its
  // order.
#define CHUNKD_KERNEL_MEMBER(Function, member, parameters, arguments, unused) \
  void(*member) parameters;
  CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_MEMBER, _)
#undef CHUNKD_KERNEL_MEMBER
};

// Words needed for the bitmap of n positions.
inline constexpr size_t BitmapWords(size_t n) { return (n + 63) / 64; }

// Every kernel set built into this binary, best first: avx512, avx2,
// scalar.
absl::Span<const KernelSet* const> AllKernelSets();

// The scalar kernel set: always built, always supported; the reference.
const KernelSet& ScalarKernelSet();

// The widest kernel set this CPU supports: the automatic choice when its
// calibration could not run (chunking/auto_kernel.h).
const KernelSet& BestKernelSet();

// The kernel set named `name` (as from --backend or CHUNKD_BACKEND).
// INVALID_ARGUMENT for an unknown name (listing the known ones),
// FAILED_PRECONDITION when this CPU or OS cannot run it. Never falls back.
absl::StatusOr<const KernelSet*> FindKernelSet(absl::string_view name);

// The kernel set forced by the environment: CHUNKD_BACKEND's when it is set
// and not empty (an error if it names an unknown or unsupported set), else
// nullptr — none forced, the engine chooses one per algorithm and thread
// count (chunking/auto_kernel.h).
absl::StatusOr<const KernelSet*> ForcedKernelSet();

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_KERNELS_H_
