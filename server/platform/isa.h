// Instruction-set detection for every instruction-set-specific unit (the
// stage-1 kernels, the fingerprint code): what the CPU implements (cpuid)
// and what the operating system saves on a context switch (xgetbv).
//
// A vector kernel may run only when both agree: the CPU has every instruction
// the kernel's translation unit was compiled for, and the OS has enabled the
// register state those instructions touch (YMM for AVX2; YMM, ZMM and the
// opmask registers for AVX-512). A CPU that reports AVX-512 under an OS (or
// hypervisor) that does not save ZMM state must not run AVX-512 code.
//
// Thread safety: CpuFeatures() detects once (thread-safe static
// initialization) and returns an immutable value.
#ifndef CHUNKD_PLATFORM_ISA_H_
#define CHUNKD_PLATFORM_ISA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "platform/isa_features.h"

namespace chunkd::platform {

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

}  // namespace chunkd::platform

#endif  // CHUNKD_PLATFORM_ISA_H_
