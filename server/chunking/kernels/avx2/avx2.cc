// The avx2 kernels. This translation unit alone is compiled with the AVX2
// flags (CMakeLists.txt); kernels.cc calls it only after checking the CPU and
// OS for the features those flags enable (kRequiredFeatures).
//
// seqcdc and crc32 are the generic bodies over the primitives of simd.h.
// fastcdc is the interleaved scalar rolling body (generic/fastcdc_rolling.h):
// AVX2 has no cheap way to look up 64-bit entries of a 256-entry table — a
// gather of four costs more than four scalar loads on current cores, and
// vpshufb tables hold 16 entries — so the table lookups stay scalar.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chunking/kernels/avx2/simd.h"
#include "chunking/kernels/backends.h"
#include "chunking/kernels/crc32_tables.h"
#include "chunking/kernels/intrinsics.h"  // first: see there

namespace chunkd::chunking::kernels::avx2 {

#include "chunking/kernels/generic/crc32.h"
#include "chunking/kernels/generic/fastcdc_rolling.h"
#include "chunking/kernels/generic/seqcdc.h"
#include "chunking/kernels/generic/rabin.h"
#include "chunking/kernels/generic/buzhash.h"
#include "chunking/kernels/generic/repmaxcdc.h"

void FastCdc(const uint8_t* data, size_t begin, size_t end,
             const GearParams& params, uint64_t* hits_s, uint64_t* hits_l) {
  FastCdcRollingGeneric(data, begin, end, params, hits_s, hits_l);
}

void Crc32(const uint8_t* data, size_t begin, size_t end, uint32_t mask,
           uint64_t* hits) {
  Crc32Generic(data, begin, end, mask, hits);
}

void SeqCdc(const uint8_t* data, size_t begin, size_t end, uint64_t* gt,
            uint64_t* lt) {
  SeqCdcGeneric(data, begin, end, gt, lt);
}

void Rabin(const uint8_t* data, size_t begin, size_t end,
           const RabinParams& params, uint64_t* hits) {
  RabinGeneric(data, begin, end, params, hits);
}

void Buzhash(const uint8_t* data, size_t begin, size_t end,
             const BuzhashParams& params, uint64_t* hits) {
  BuzhashGeneric(data, begin, end, params, hits);
}

void RepMaxCdc(const uint8_t* data, size_t begin, size_t end,
               const uint64_t* gear, uint64_t* max) {
  RepMaxCdcGeneric(data, begin, end, gear, max);
}

// What the CPU and OS must offer before this unit's code runs (backends.h).
const uint32_t kRequiredFeatures = kCompiledFeatures;

}  // namespace chunkd::chunking::kernels::avx2

// See backends.h: nothing here may bring static objects or shared inline
// functions into a translation unit compiled with wider instructions.
#if defined(_GLIBCXX_IOSTREAM) || defined(ABSL_BASE_CONFIG_H_)
#error "an ISA translation unit must not include <iostream> or absl"
#endif
