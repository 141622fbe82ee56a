// FingerprintIndex: the deduplication index shared by all streams (and, with
// the Redis backends, by all replicas). DESIGN.md §5.
//
// Every call is batched: one call carries many fingerprints and returns one
// result per fingerprint, in order. Entries live in a namespace (one tenant's
// index); namespaces never share entries. Per fingerprint the index keeps the
// chunk size and a reference count.
//
// Thread safety: implementations are thread-safe; any number of streams call
// one index concurrently.
#ifndef CHUNKD_INDEX_FINGERPRINT_INDEX_H_
#define CHUNKD_INDEX_FINGERPRINT_INDEX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace chunkd::index {

// Longest namespace name.
inline constexpr size_t kMaxNamespaceLength = 128;

// OK when `ns` is 1..kMaxNamespaceLength characters of [A-Za-z0-9._-];
// otherwise INVALID_ARGUMENT naming the `namespace` field and the rule.
absl::Status ValidateNamespace(absl::string_view ns);

// A chunk to insert.
struct InsertEntry {
  std::string fingerprint;  // binary digest
  uint32_t size = 0;        // chunk length in bytes
};

struct InsertResult {
  // True for exactly one caller per fingerprint: the one whose insert created
  // the entry. Racing inserts of the same new fingerprint see one true.
  bool is_new = false;
  // Reference count after this insert.
  uint64_t ref_count = 0;
};

class FingerprintIndex {
 public:
  virtual ~FingerprintIndex() = default;

  // Backend name as used by flags and metrics: "memory", "redis", ...
  virtual absl::string_view backend() const = 0;

  // For each fingerprint, whether the namespace has it.
  virtual absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns, absl::Span<const std::string> fingerprints) = 0;

  // Insert-if-absent and count a reference, atomically per fingerprint. A
  // fingerprint present twice in one batch is new at most once.
  virtual absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries) = 0;

  // Drops one reference per fingerprint; an entry whose count reaches zero is
  // removed. Returns the count left (0 for removed or absent entries).
  virtual absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints) = 0;
};

// Creates the index named by a --index flag value: "memory" (the embedded
// default). INVALID_ARGUMENT for an unknown scheme.
absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateIndex(
    absl::string_view spec);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_FINGERPRINT_INDEX_H_
