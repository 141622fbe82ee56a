#include "index/fingerprint_index.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "index/memory_index.h"

namespace chunkd::index {

absl::Status ValidateNamespace(absl::string_view ns) {
  if (ns.empty() || ns.size() > kMaxNamespaceLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "namespace must be 1..", kMaxNamespaceLength,
        " characters of [A-Za-z0-9._-], got ", ns.size(), " characters"));
  }
  for (char c : ns) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "namespace may contain only [A-Za-z0-9._-]; character 0x",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2),
          " is not allowed"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec) {
  if (spec == "memory") return std::make_unique<MemoryIndex>();
  return absl::InvalidArgumentError(absl::StrCat(
      "--index '", spec, "' is not supported; use 'memory'"));
}

}  // namespace chunkd::index
