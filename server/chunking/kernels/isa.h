// Instruction-set detection for the stage-1 kernels: what the CPU implements
// (cpuid) and what the operating system saves on a context switch (xgetbv).
//
// A vector kernel may run only when both agree: the CPU has every instruction
// the kernel's translation unit was compiled for, and the OS has enabled the
// register state those instructions touch (YMM for AVX2; YMM, ZMM and the
// opmask registers for AVX-512). A CPU that reports AVX-512 under an OS (or
// hypervisor) that does not save ZMM state must not run AVX-512 code.
//
// Thread safety: CpuFeatures() detects once (thread-safe static
// initialization) and returns an immutable value.
#ifndef CHUNKD_CHUNKING_KERNELS_ISA_H_
#define CHUNKD_CHUNKING_KERNELS_ISA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace chunkd::chunking::kernels {

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

// "popcnt", "avx512vbmi", "os-zmm-state", ...
const char* IsaFeatureName(IsaFeature feature);

// The features of this CPU and OS, a bitwise OR of IsaFeature. Detected once.
uint32_t CpuFeatures();

// Pure helper for CpuFeatures(), exposed for tests: the features implied by
// raw cpuid words (leaf 1 ECX, leaf 7.0 EBX and ECX) and XCR0. `has_xgetbv`
// is false when leaf 1 does not report OSXSAVE (XCR0 is then unreadable and
// every vector state counts as disabled).
uint32_t FeaturesFromCpuid(uint32_t leaf1_ecx, uint32_t leaf7_ebx,
                           uint32_t leaf7_ecx, bool has_xgetbv, uint64_t xcr0);

// The names of the features in `required` that `available` lacks, in
// IsaFeature order; empty when all are present.
std::vector<std::string> MissingFeatures(uint32_t required, uint32_t available);

}  // namespace chunkd::chunking::kernels

#endif  // CHUNKD_CHUNKING_KERNELS_ISA_H_
