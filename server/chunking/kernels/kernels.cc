// The kernel table and its selection: detection once, best first, and an
// error — never a silent fallback — for a forced kernel that is unknown or
// that this CPU or OS cannot run.

#include "chunking/kernels/kernels.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "chunking/kernels/backends.h"
#include "chunking/kernels/isa.h"

namespace chunkd::chunking::kernels {
namespace {

// The CPU and OS features each backend needs. Keep in sync with the -m flags
// of its translation unit in CMakeLists.txt: the compiler may use any
// instruction those flags enable, anywhere in that unit.
constexpr uint32_t kScalarRequired = 0;
constexpr uint32_t kAvx2Required =
    kPopcnt | kBmi1 | kBmi2 | kAvx | kAvx2 | kOsYmm;
// VBMI (vpermb, vpermi2b), IFMA (vpmadd52luq), GFNI (gf2p8affineqb) and DQ
// (kmovb) are what the kernels are built on; every CPU with VBMI and IFMA
// since Ice Lake and Zen 4 also has the others.
constexpr uint32_t kAvx512Required = kAvx2Required | kAvx512F | kAvx512Dq |
                                     kAvx512Bw | kAvx512Vl | kAvx512Vbmi |
                                     kAvx512Ifma | kGfni | kOsZmm;

template <uint32_t kRequired>
bool Supported() {
  return (CpuFeatures() & kRequired) == kRequired;
}

// Kernel::fastcdc takes GearParams, the backends GearArgs (backends.h says
// why); one direct call more per range.
using BackendFastCdc = void (*)(const uint8_t*, size_t, size_t, const GearArgs&,
                                uint64_t*, uint64_t*);
template <BackendFastCdc kFastCdc>
void FastCdcAdapter(const uint8_t* data, size_t begin, size_t end,
                    const GearParams& params, uint64_t* hits_s,
                    uint64_t* hits_l) {
  const GearArgs args{params.gear, params.mask_s, params.mask_l};
  kFastCdc(data, begin, end, args, hits_s, hits_l);
}

constexpr Kernel kScalar = {"scalar", &Supported<kScalarRequired>,
                            &FastCdcAdapter<&scalar::FastCdc>, &scalar::Crc32,
                            &scalar::SeqCdc};
#if CHUNKD_KERNELS_X86_BACKENDS
constexpr Kernel kAvx2 = {"avx2", &Supported<kAvx2Required>,
                          &FastCdcAdapter<&avx2::FastCdc>, &avx2::Crc32,
                          &avx2::SeqCdc};
constexpr Kernel kAvx512 = {"avx512", &Supported<kAvx512Required>,
                            &FastCdcAdapter<&avx512::FastCdc>, &avx512::Crc32,
                            &avx512::SeqCdc};
#endif

// Best first: BestKernel() takes the first supported entry.
constexpr const Kernel* kAll[] = {
#if CHUNKD_KERNELS_X86_BACKENDS
    &kAvx512,
    &kAvx2,
#endif
    &kScalar,
};

uint32_t RequiredFeatures(const Kernel& kernel) {
#if CHUNKD_KERNELS_X86_BACKENDS
  if (&kernel == &kAvx512) return kAvx512Required;
  if (&kernel == &kAvx2) return kAvx2Required;
#endif
  return kScalarRequired;
}

std::string KnownNames() {
  std::vector<absl::string_view> names;
  for (const Kernel* k : kAll) names.push_back(k->name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Span<const Kernel* const> AllKernels() { return kAll; }

const Kernel& ScalarKernel() { return kScalar; }

const Kernel& BestKernel() {
  // Detected once; the table is immutable, so the pointer never changes.
  static const Kernel* const best = [] {
    for (const Kernel* k : kAll) {
      if (k->supported()) return k;
    }
    return &kScalar;  // unreachable: scalar is always supported
  }();
  return *best;
}

absl::StatusOr<const Kernel*> FindKernel(absl::string_view name) {
  for (const Kernel* k : kAll) {
    if (name != k->name) continue;
    const std::vector<std::string> missing =
        MissingFeatures(RequiredFeatures(*k), CpuFeatures());
    if (!missing.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel backend \"", name,
                       "\" is not supported by this CPU or OS: missing ",
                       absl::StrJoin(missing, ", ")));
    }
    return k;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown kernel backend \"", name, "\"; known: ", KnownNames()));
}

absl::StatusOr<const Kernel*> DefaultKernel() {
  // Read on every call (not cached) so that a test or a supervisor changing
  // the environment is honoured. Unset or empty means "choose the best".
  const char* env = std::getenv("CHUNKD_BACKEND");
  if (env == nullptr || *env == '\0') return &BestKernel();
  absl::StatusOr<const Kernel*> kernel = FindKernel(env);
  if (!kernel.ok()) {
    return absl::Status(
        kernel.status().code(),
        absl::StrCat("CHUNKD_BACKEND: ", kernel.status().message()));
  }
  return kernel;
}

}  // namespace chunkd::chunking::kernels
