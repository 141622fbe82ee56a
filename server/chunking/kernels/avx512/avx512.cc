// The avx512 kernel set. This translation unit alone is compiled with the
// AVX-512 flags (CMakeLists.txt); kernels.cc calls it only after checking
// the CPU and OS for the features those flags enable (kRequiredFeatures).
// Its functions are the generic bodies (generic/) over the primitives of
// simd.h; fastcdc's is its own (fastcdc_lanes.h).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunking/kernels/avx512/simd.h"
#include "chunking/kernels/intrinsics.h"  // first: see there
#include "chunking/kernels/kernel_sets.h"

namespace chunkd::chunking::kernels::avx512 {

#include "chunking/kernels/generic/bodies.h"

CHUNKD_KERNEL_SET_DEFINITIONS()

}  // namespace chunkd::chunking::kernels::avx512

// See kernel_sets.h: nothing here may bring static objects or shared inline
// functions into a translation unit compiled with wider instructions.
#if defined(_GLIBCXX_IOSTREAM) || defined(ABSL_BASE_CONFIG_H_)
#error "an ISA translation unit must not include <iostream> or absl"
#endif
