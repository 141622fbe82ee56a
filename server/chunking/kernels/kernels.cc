// The kernel set table and its selection: detection once, best first, and
// an error — never a silent fallback — for a forced kernel set that is
// unknown or that this CPU or OS cannot run.

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
#include "chunking/kernels/kernel_sets.h"
#include "platform/isa.h"

namespace chunkd::chunking::kernels {
namespace {

// KernelSet::supported of a kernel set that needs *kRequired.
template <const uint32_t* kRequired>
bool Supported() {
  return (platform::CpuFeatures() & *kRequired) == *kRequired;
}

// A row of the kernel set list: its KernelSet, with the functions in the
// order of CHUNKD_KERNEL_FUNCTIONS, and the features it needs.
struct Row {
  KernelSet set;
  const uint32_t* required;
};

#define CHUNKD_KERNEL_FUNCTION_OF(Function, member, parameters, arguments, \
                                  name)                                    \
  &name::Function,
#define CHUNKD_KERNEL_SET_ROW(name)                                        \
  Row{KernelSet{#name, &Supported<&name::kRequiredFeatures>,               \
                CHUNKD_KERNEL_FUNCTIONS(CHUNKD_KERNEL_FUNCTION_OF, name)}, \
      &name::kRequiredFeatures},
// Best first: BestKernelSet() takes the first supported one.
constexpr Row kRows[] = {CHUNKD_KERNEL_SETS(CHUNKD_KERNEL_SET_ROW)};
#undef CHUNKD_KERNEL_SET_ROW
#undef CHUNKD_KERNEL_FUNCTION_OF

constexpr size_t kCount = sizeof(kRows) / sizeof(kRows[0]);

constexpr std::array<const KernelSet*, kCount> MakeAll() {
  std::array<const KernelSet*, kCount> all{};
  for (size_t i = 0; i < kCount; ++i) all[i] = &kRows[i].set;
  return all;
}
constexpr std::array<const KernelSet*, kCount> kAll = MakeAll();

constexpr bool IsScalar(const char* name) {
  const char scalar[] = "scalar";
  for (size_t i = 0; i < sizeof(scalar); ++i) {
    if (name[i] != scalar[i]) return false;
  }
  return true;
}
static_assert(IsScalar(kRows[kCount - 1].set.name),
              "the kernel set list ends with scalar, which every CPU runs");

std::string KnownNames() {
  std::vector<absl::string_view> names;
  for (const KernelSet* k : kAll) names.push_back(k->name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Span<const KernelSet* const> AllKernelSets() { return kAll; }

const KernelSet& ScalarKernelSet() { return kRows[kCount - 1].set; }

const KernelSet& BestKernelSet() {
  // Detected once; the table is immutable, so the pointer never changes.
  static const KernelSet* const best = [] {
    for (const KernelSet* k : kAll) {
      if (k->supported()) return k;
    }
    return &ScalarKernelSet();  // unreachable: scalar is always supported
  }();
  return *best;
}

absl::StatusOr<const KernelSet*> FindKernelSet(absl::string_view name) {
  for (const Row& row : kRows) {
    const KernelSet* k = &row.set;
    if (name != k->name) continue;
    const std::vector<std::string> missing =
        platform::MissingFeatures(*row.required, platform::CpuFeatures());
    if (!missing.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("kernel set \"", name,
                       "\" is not supported by this CPU or OS: missing ",
                       absl::StrJoin(missing, ", ")));
    }
    return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown kernel set \"", name, "\"; known: ", KnownNames()));
}

absl::StatusOr<const KernelSet*> ForcedKernelSet() {
  // Read on every call (not cached) so that a test or a supervisor changing
  // the environment is honoured. Unset or empty means "choose
  // automatically".
  const char* env = std::getenv("CHUNKD_BACKEND");
  if (env == nullptr || *env == '\0') return nullptr;
  absl::StatusOr<const KernelSet*> set = FindKernelSet(env);
  if (!set.ok()) {
    return absl::Status(
        set.status().code(),
        absl::StrCat("CHUNKD_BACKEND: ", set.status().message()));
  }
  return set;
}

}  // namespace chunkd::chunking::kernels
