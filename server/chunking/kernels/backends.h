// The kernel functions of each instruction set, for the dispatch table in
// kernels.cc. Internal to the kernels.
//
// Each namespace's functions are defined in that set's own translation unit
// (scalar/scalar.cc, avx2/avx2.cc, avx512/avx512.cc), the only one compiled
// with the wider instruction set; callers reach them only through the table,
// after checking the CPU.
//
// This header is all the ISA translation units include of the library: no
// kernels.h, no absl, no <iostream>. Any inline function or static object
// they pulled in would be compiled there with the wider instructions — a
// static initializer (such as <iostream>'s) would then run at start-up on
// every CPU, and an inline function could be the copy the linker keeps for
// the whole program. avx2.cc and avx512.cc check this at compile time.
//
// Thread safety: all functions are pure.
#ifndef CHUNKD_CHUNKING_KERNELS_BACKENDS_H_
#define CHUNKD_CHUNKING_KERNELS_BACKENDS_H_

#include <cstddef>
#include <cstdint>

namespace chunkd::chunking::kernels {

// GearParams (kernels.h) as the backends see it; kernels.cc converts.
struct GearArgs {
  const uint64_t* gear;  // 256 entries, seed applied
  uint64_t mask_s;
  uint64_t mask_l;
};

// The signatures of Kernel (kernels.h), with GearArgs for GearParams.
#define CHUNKD_KERNELS_DECLARE_BACKEND()                                    \
  void FastCdc(const uint8_t* data, size_t begin, size_t end,               \
               const GearArgs& params, uint64_t* hits_s, uint64_t* hits_l); \
  void Crc32(const uint8_t* data, size_t begin, size_t end, uint32_t mask,  \
             uint64_t* hits);                                               \
  void SeqCdc(const uint8_t* data, size_t begin, size_t end, uint64_t* gt,  \
              uint64_t* lt)

namespace scalar {
CHUNKD_KERNELS_DECLARE_BACKEND();
}  // namespace scalar

namespace avx2 {
CHUNKD_KERNELS_DECLARE_BACKEND();
}  // namespace avx2

namespace avx512 {
CHUNKD_KERNELS_DECLARE_BACKEND();
}  // namespace avx512

#undef CHUNKD_KERNELS_DECLARE_BACKEND

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_BACKENDS_H_
