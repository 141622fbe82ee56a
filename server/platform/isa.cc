#include "platform/isa.h"

#include <cstdint>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CHUNKD_KERNELS_X86 1
#endif

namespace chunkd::platform {
namespace {

// cpuid leaf 1, ECX.
constexpr uint32_t kLeaf1EcxPclmul = 1u << 1;
constexpr uint32_t kLeaf1EcxSsse3 = 1u << 9;
constexpr uint32_t kLeaf1EcxSse41 = 1u << 19;
constexpr uint32_t kLeaf1EcxPopcnt = 1u << 23;
constexpr uint32_t kLeaf1EcxOsxsave = 1u << 27;
constexpr uint32_t kLeaf1EcxAvx = 1u << 28;
// cpuid leaf 7 subleaf 0, EBX.
constexpr uint32_t kLeaf7EbxBmi1 = 1u << 3;
constexpr uint32_t kLeaf7EbxAvx2 = 1u << 5;
constexpr uint32_t kLeaf7EbxBmi2 = 1u << 8;
constexpr uint32_t kLeaf7EbxAvx512F = 1u << 16;
constexpr uint32_t kLeaf7EbxAvx512Dq = 1u << 17;
constexpr uint32_t kLeaf7EbxAvx512Ifma = 1u << 21;
constexpr uint32_t kLeaf7EbxSha = 1u << 29;
constexpr uint32_t kLeaf7EbxAvx512Bw = 1u << 30;
constexpr uint32_t kLeaf7EbxAvx512Vl = 1u << 31;
// cpuid leaf 7 subleaf 0, ECX.
constexpr uint32_t kLeaf7EcxAvx512Vbmi = 1u << 1;
constexpr uint32_t kLeaf7EcxGfni = 1u << 8;
constexpr uint32_t kLeaf7EcxVpclmulqdq = 1u << 10;
// XCR0: x87 | SSE | AVX, and opmask | ZMM_Hi256 | Hi16_ZMM.
constexpr uint64_t kXcr0Ymm = 0x6;
constexpr uint64_t kXcr0Zmm = 0xe0;

struct Name {
  IsaFeature feature;
  const char* name;
};

constexpr Name kNames[] = {
    {kPopcnt, "popcnt"},
    {kBmi1, "bmi1"},
    {kBmi2, "bmi2"},
    {kAvx, "avx"},
    {kAvx2, "avx2"},
    {kAvx512F, "avx512f"},
    {kAvx512Dq, "avx512dq"},
    {kAvx512Bw, "avx512bw"},
    {kAvx512Vl, "avx512vl"},
    {kAvx512Vbmi, "avx512vbmi"},
    {kAvx512Ifma, "avx512ifma"},
    {kGfni, "gfni"},
    {kOsYmm, "os-ymm-state"},
    {kOsZmm, "os-zmm-state"},
    {kSsse3, "ssse3"},
    {kSse41, "sse4_1"},
    {kSha, "sha_ni"},
    {kPclmul, "pclmulqdq"},
    {kVpclmulqdq, "vpclmulqdq"},
};

uint32_t Detect() {
#ifdef CHUNKD_KERNELS_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 1) return 0;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  const uint32_t leaf1_ecx = ecx;
  uint32_t leaf7_ebx = 0, leaf7_ecx = 0;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    leaf7_ebx = ebx;
    leaf7_ecx = ecx;
  }
  const bool has_xgetbv = (leaf1_ecx & kLeaf1EcxOsxsave) != 0;
  uint64_t xcr0 = 0;
  if (has_xgetbv) {
    // xgetbv by opcode: no -mxsave needed in this baseline translation unit.
    uint32_t lo = 0, hi = 0;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
  return FeaturesFromCpuid(leaf1_ecx, leaf7_ebx, leaf7_ecx, has_xgetbv, xcr0);
#else
  return 0;
#endif
}

}  // namespace

const char* IsaFeatureName(IsaFeature feature) {
  for (const Name& n : kNames) {
    if (n.feature == feature) return n.name;
  }
  return "unknown";
}

uint32_t FeaturesFromCpuid(uint32_t leaf1_ecx, uint32_t leaf7_ebx,
                           uint32_t leaf7_ecx, bool has_xgetbv, uint64_t xcr0) {
  uint32_t f = 0;
  if (leaf1_ecx & kLeaf1EcxPopcnt) f |= kPopcnt;
  if (leaf1_ecx & kLeaf1EcxAvx) f |= kAvx;
  if (leaf1_ecx & kLeaf1EcxSsse3) f |= kSsse3;
  if (leaf1_ecx & kLeaf1EcxSse41) f |= kSse41;
  if (leaf7_ebx & kLeaf7EbxBmi1) f |= kBmi1;
  if (leaf7_ebx & kLeaf7EbxBmi2) f |= kBmi2;
  if (leaf7_ebx & kLeaf7EbxAvx2) f |= kAvx2;
  if (leaf7_ebx & kLeaf7EbxAvx512F) f |= kAvx512F;
  if (leaf7_ebx & kLeaf7EbxAvx512Dq) f |= kAvx512Dq;
  if (leaf7_ebx & kLeaf7EbxAvx512Ifma) f |= kAvx512Ifma;
  if (leaf7_ebx & kLeaf7EbxSha) f |= kSha;
  if (leaf7_ebx & kLeaf7EbxAvx512Bw) f |= kAvx512Bw;
  if (leaf7_ebx & kLeaf7EbxAvx512Vl) f |= kAvx512Vl;
  if (leaf7_ecx & kLeaf7EcxAvx512Vbmi) f |= kAvx512Vbmi;
  if (leaf7_ecx & kLeaf7EcxGfni) f |= kGfni;
  if (leaf1_ecx & kLeaf1EcxPclmul) f |= kPclmul;
  if (leaf7_ecx & kLeaf7EcxVpclmulqdq) f |= kVpclmulqdq;
  // Without OSXSAVE the OS manages no extended state: nothing wider than SSE
  // may run, whatever the CPU implements.
  if (has_xgetbv && (xcr0 & kXcr0Ymm) == kXcr0Ymm) {
    f |= kOsYmm;
    if ((xcr0 & kXcr0Zmm) == kXcr0Zmm) f |= kOsZmm;
  }
  return f;
}

uint32_t CpuFeatures() {
  static const uint32_t features = Detect();
  return features;
}

std::vector<std::string> MissingFeatures(uint32_t required,
                                         uint32_t available) {
  std::vector<std::string> missing;
  for (const Name& n : kNames) {
    if ((required & n.feature) && !(available & n.feature)) {
      missing.emplace_back(n.name);
    }
  }
  return missing;
}

}  // namespace chunkd::platform
