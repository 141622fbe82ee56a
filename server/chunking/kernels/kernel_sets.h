// The kernel sets' side of the kernel table: what every kernel set's
// translation unit defines, declared for all of them at once, and the macro
// that defines it. Internal to the kernels.
//
// The kernel sets are listed once, best first, in kernels/CMakeLists.txt,
// which compiles set `name` from name/name.cc with that table's flags and
// generates CHUNKD_KERNEL_SETS(X) = X(avx512) X(avx2) X(scalar) (on x86-64)
// into chunking/kernels/kernel_set_list.h. Each set's translation unit
// includes every algorithm's body (generic/bodies.h) inside its namespace
// kernels::name and expands CHUNKD_KERNEL_SET_DEFINITIONS(), which defines
// every function of CHUNKD_KERNEL_FUNCTIONS (functions.h) from its body and
// kRequiredFeatures; so a set's file names no algorithm. kernels.cc builds
// the dispatch table from the same two lists and calls a set only after
// checking the CPU and OS.
//
// This header is all the ISA translation units include of the library: no
// kernels.h, no absl, no <iostream>. Any inline function or static object
// they pulled in would be compiled there with the wider instructions — a
// static initializer (such as <iostream>'s) would then run at start-up on
// every CPU, and an inline function could be the copy the linker keeps for
// the whole program. avx2.cc and avx512.cc check this at compile time.
//
// Thread safety: all functions are pure; the constants are immutable.
#ifndef CHUNKD_CHUNKING_KERNELS_KERNEL_SETS_H_
#define CHUNKD_CHUNKING_KERNELS_KERNEL_SETS_H_

#include <cstddef>
#include <cstdint>

// Constant tables of the crc32 bodies (constexpr data only).
#include "chunking/kernels/crc32_tables.h"
#include "chunking/kernels/functions.h"
#include "chunking/kernels/kernel_set_list.h"
#include "platform/isa_features.h"

namespace chunkd::chunking::kernels {

// The features the compiler flags of the including translation unit let it
// use, of those isa.h knows: what a kernel set needs from the CPU and OS, the
// OS state included (YMM with AVX, ZMM with AVX-512). SSSE3 and SSE4.1 count
// only without AVX: with it the compiler emits their VEX forms, which AVX
// covers. Internal linkage: each translation unit has its own value.
constexpr uint32_t kCompiledFeatures = 0
#ifdef __POPCNT__
                                       | platform::kPopcnt
#endif
#ifdef __BMI__
                                       | platform::kBmi1
#endif
#ifdef __BMI2__
                                       | platform::kBmi2
#endif
#ifdef __AVX__
                                       | platform::kAvx | platform::kOsYmm
#elif defined(__SSSE3__)
                                       | platform::kSsse3
#endif
#if defined(__SSE4_1__) && !defined(__AVX__)
                                       | platform::kSse41
#endif
#ifdef __AVX2__
                                       | platform::kAvx2
#endif
#ifdef __AVX512F__
                                       | platform::kAvx512F | platform::kOsZmm
#endif
#ifdef __AVX512DQ__
                                       | platform::kAvx512Dq
#endif
#ifdef __AVX512BW__
                                       | platform::kAvx512Bw
#endif
#ifdef __AVX512VL__
                                       | platform::kAvx512Vl
#endif
#ifdef __AVX512VBMI__
                                       | platform::kAvx512Vbmi
#endif
#ifdef __AVX512IFMA__
                                       | platform::kAvx512Ifma
#endif
#ifdef __GFNI__
                                       | platform::kGfni
#endif
#ifdef __SHA__
                                       | platform::kSha
#endif
#ifdef __PCLMUL__
                                       | platform::kPclmul
#endif
#ifdef __VPCLMULQDQ__
                                       | platform::kVpclmulqdq
#endif
    ;

// In the namespace of every kernel set: its stage-1 functions, and the CPU
// and OS features it needs, which its translation unit defines as its
// kCompiledFeatures.
#define CHUNKD_KERNEL_DECLARE_FUNCTION(Function, member, parameters, \
                                       arguments, unused)            \
  void Function parameters;
#define CHUNKD_KERNEL_DECLARE_SET(name)                      \
  namespace name {                                           \
  CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_DECLARE_FUNCTION, _) \
  extern const uint32_t kRequiredFeatures;                   \
  }
CHUNKD_KERNEL_SETS(CHUNKD_KERNEL_DECLARE_SET)
#undef CHUNKD_KERNEL_DECLARE_SET
#undef CHUNKD_KERNEL_DECLARE_FUNCTION

// Expanded once in a kernel set's namespace, after its bodies: every
// function of CHUNKD_KERNEL_FUNCTIONS, calling <Function>Body (a body
// missing for a row is a compile error there), and kRequiredFeatures.
#define CHUNKD_KERNEL_DEFINE_FUNCTION(Function, member, parameters, arguments, \
                                      unused)                                  \
  void Function parameters { Function##Body arguments; }
#define CHUNKD_KERNEL_SET_DEFINITIONS()                     \
  CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_DEFINE_FUNCTION, _) \
  const uint32_t kRequiredFeatures = kCompiledFeatures;

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_KERNEL_SETS_H_
