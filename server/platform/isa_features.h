// The instruction-set features the stage-1 kernels (and the fingerprint
// code) may require, as bits: what isa.h detects and
// chunking/kernels/kernel_sets.h derives from a translation unit's compiler
// flags.
//
// Plain constants and nothing else, so that the ISA translation units can
// include this (see chunking/kernels/kernel_sets.h).
#ifndef CHUNKD_PLATFORM_ISA_FEATURES_H_
#define CHUNKD_PLATFORM_ISA_FEATURES_H_

#include <cstdint>

namespace chunkd::platform {

// One bit per feature a kernel may require. The names (IsaFeatureName) are
// those of /proc/cpuinfo and of the compilers' -m flags.
enum IsaFeature : uint32_t {
  kPopcnt = 1u << 0,
  kBmi1 = 1u << 1,
  kBmi2 = 1u << 2,
  kAvx = 1u << 3,
  kAvx2 = 1u << 4,
  kAvx512F = 1u << 5,
  kAvx512Dq = 1u << 6,
  kAvx512Bw = 1u << 7,
  kAvx512Vl = 1u << 8,
  kAvx512Vbmi = 1u << 9,
  kAvx512Ifma = 1u << 10,
  kGfni = 1u << 11,
  // Register state the OS saves (XCR0), not CPU instructions.
  kOsYmm = 1u << 12,  // XCR0 bits 1-2: SSE and AVX (YMM) state
  kOsZmm = 1u << 13,  // XCR0 bits 5-7: opmask, ZMM0-15 upper halves, ZMM16-31
  // For the SHA-256 code (fingerprint/sha256_mb.h): SSE only, no OS state
  // beyond what every x86-64 OS saves.
  kSsse3 = 1u << 14,
  kSse41 = 1u << 15,
  kSha = 1u << 16,
  // For the GHASH code (fingerprint/content_key.h).
  kPclmul = 1u << 17,
  kVpclmulqdq = 1u << 18,
};

}  // namespace chunkd::platform

#endif  // CHUNKD_PLATFORM_ISA_FEATURES_H_
