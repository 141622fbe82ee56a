// fastcdc, stage-1 bodies (definition in ../functions.h): the scalar
// definition; for avx2 the Gear hash rolled in interleaved scalar lanes
// (fastcdc_rolling.h), as AVX2 has no cheap way to look up 64-bit entries
// of a 256-entry table (a gather of four costs more than four scalar loads
// on current cores, and vpshufb tables hold 16 entries); for avx512 the
// lanes of ../avx512/fastcdc_lanes.h, which look the table up with
// vpermi2b.

#ifdef CHUNKD_KERNEL_SET_SCALAR

// The scalar kernel set: the definition of ../functions.h, one position
// after the other (the reference of the differential tests).
inline void FastCdcBody(const uint8_t* data, size_t begin, size_t end,
                        const GearParams& params, uint64_t* hits_s,
                        uint64_t* hits_l) {
  const uint64_t* const gear = params.gear;
  // Rolling `h = (h << 1) + gear[byte]` from 63 bytes before `begin` (or from
  // data[0]) gives exactly W(p): the byte 64 back is shifted out of 64 bits.
  uint64_t h = 0;
  for (size_t q = begin >= 63 ? begin - 63 : 0; q < begin; ++q) {
    h = (h << 1) + gear[data[q]];
  }
  ForEachWord(begin, end, hits_s, hits_l, [&](size_t p, bool* s, bool* l) {
    h = (h << 1) + gear[data[p]];
    *s = (h & params.mask_s) == 0;
    *l = (h & params.mask_l) == 0;
  });
}

#else  // the vector kernel sets

#include "chunking/kernels/generic/fastcdc_rolling.h"

#if defined(__AVX512IFMA__) && defined(__AVX512VBMI__)

#include "chunking/kernels/avx512/fastcdc_lanes.h"

#else  // AVX2

inline void FastCdcBody(const uint8_t* data, size_t begin, size_t end,
                        const GearParams& params, uint64_t* hits_s,
                        uint64_t* hits_l) {
  FastCdcRollingGeneric(data, begin, end, params, hits_s, hits_l);
}

#endif

#endif  // CHUNKD_KERNEL_SET_SCALAR
