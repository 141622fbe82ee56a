// <immintrin.h> for the ISA translation units, included before anything else
// there.
//
// GCC 12 reports its own _mm512_undefined_*() placeholders inside the
// intrinsic headers (unpack, shift, permutexvar) as uninitialized once they
// are inlined at -O2 (GCC bug 105593, fixed in GCC 13). The pragmas silence
// those two warnings for the header's lines only — middle-end warnings are
// matched by source location — so our own code keeps them.
#ifndef CHUNKD_CHUNKING_KERNELS_INTRINSICS_H_
#define CHUNKD_CHUNKING_KERNELS_INTRINSICS_H_

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#endif  // CHUNKD_CHUNKING_KERNELS_INTRINSICS_H_
