// The kernel table and its selection: detection once, best first, and an
// error — never a silent fallback — for a forced kernel that is unknown or
// that this CPU or OS cannot run.

#include "chunking/kernels/kernels.h"

#include <array>
#include <cstddef>
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
#include "platform/isa.h"

namespace chunkd::chunking::kernels {
namespace {

// Kernel::supported of a backend that needs *kRequired.
template <const uint32_t* kRequired>
bool Supported() {
  return (platform::CpuFeatures() & *kRequired) == *kRequired;
}

// A row of the backend list: its Kernel, with the functions in the order of
// CHUNKD_KERNEL_FUNCTIONS, and the features it needs.
struct Backend {
  Kernel kernel;
  const uint32_t* required;
};

#define CHUNKD_KERNEL_FUNCTION_OF(Function, member, parameters, name) \
  &name::Function,
#define CHUNKD_KERNEL_BACKEND(name)                                         \
  Backend{Kernel{#name, &Supported<&name::kRequiredFeatures>,               \
                 CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_FUNCTION_OF, name)}, \
          &name::kRequiredFeatures},
// Best first: BestKernel() takes the first supported one.
constexpr Backend kBackends[] = {CHUNKD_KERNEL_BACKENDS(CHUNKD_KERNEL_BACKEND)};
#undef CHUNKD_KERNEL_BACKEND
#undef CHUNKD_KERNEL_FUNCTION_OF

constexpr size_t kCount = sizeof(kBackends) / sizeof(kBackends[0]);

constexpr std::array<const Kernel*, kCount> MakeAll() {
  std::array<const Kernel*, kCount> all{};
  for (size_t i = 0; i < kCount; ++i) all[i] = &kBackends[i].kernel;
  return all;
}
constexpr std::array<const Kernel*, kCount> kAll = MakeAll();

constexpr bool IsScalar(const char* name) {
  const char scalar[] = "scalar";
  for (size_t i = 0; i < sizeof(scalar); ++i) {
    if (name[i] != scalar[i]) return false;
  }
  return true;
}
static_assert(IsScalar(kBackends[kCount - 1].kernel.name),
              "the backend list ends with scalar, which every CPU runs");

std::string KnownNames() {
  std::vector<absl::string_view> names;
  for (const Kernel* k : kAll) names.push_back(k->name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Span<const Kernel* const> AllKernels() { return kAll; }

const Kernel& ScalarKernel() { return kBackends[kCount - 1].kernel; }

const Kernel& BestKernel() {
  // Detected once; the table is immutable, so the pointer never changes.
  static const Kernel* const best = [] {
    for (const Kernel* k : kAll) {
      if (k->supported()) return k;
    }
    return &ScalarKernel();  // unreachable: scalar is always supported
  }();
  return *best;
}

absl::StatusOr<const Kernel*> FindKernel(absl::string_view name) {
  for (const Backend& backend : kBackends) {
    const Kernel* k = &backend.kernel;
    if (name != k->name) continue;
    const std::vector<std::string> missing =
        platform::MissingFeatures(*backend.required, platform::CpuFeatures());
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

absl::StatusOr<const Kernel*> ForcedKernel() {
  // Read on every call (not cached) so that a test or a supervisor changing
  // the environment is honoured. Unset or empty means "choose
  // automatically".
  const char* env = std::getenv("CHUNKD_BACKEND");
  if (env == nullptr || *env == '\0') return nullptr;
  absl::StatusOr<const Kernel*> kernel = FindKernel(env);
  if (!kernel.ok()) {
    return absl::Status(
        kernel.status().code(),
        absl::StrCat("CHUNKD_BACKEND: ", kernel.status().message()));
  }
  return kernel;
}

}  // namespace chunkd::chunking::kernels
