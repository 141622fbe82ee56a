#include "service/instrumented_index.h"

#include <chrono>
#include <utility>

#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

bool IsOk(const absl::Status& status) { return status.ok(); }
template <typename T>
bool IsOk(const absl::StatusOr<T>& result) {
  return result.ok();
}

// `status` with the reason every backend's refusals of its code share, when
// the backend named none: RESOURCE_EXHAUSTED is a full index, UNAVAILABLE an
// index out of reach.
absl::Status WithIndexReason(absl::Status status) {
  if (HasReason(status)) return status;
  if (absl::IsResourceExhausted(status)) {
    return WithReason(std::move(status), ErrorReason::kIndexFull);
  }
  if (absl::IsUnavailable(status)) {
    return WithReason(std::move(status), ErrorReason::kIndexUnavailable);
  }
  return status;
}
template <typename T>
absl::StatusOr<T> WithIndexReason(absl::StatusOr<T> result) {
  if (result.ok()) return result;
  return WithIndexReason(std::move(result).status());
}

// Runs `call`, then counts it in `m` by result and records its duration.
template <typename Call>
auto Measure(const metrics::IndexOpMetrics& m, Call&& call) -> decltype(call()) {
  const auto start = std::chrono::steady_clock::now();
  auto result = call();
  const std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  m.duration->Observe(elapsed.count());
  if (IsOk(result)) {
    m.ok->Increment();
    return result;
  }
  m.error->Increment();
  return WithIndexReason(std::move(result));
}

}  // namespace

InstrumentedIndex::InstrumentedIndex(
    std::unique_ptr<index::FingerprintIndex> index, metrics::Metrics* metrics)
    : index_(std::move(index)),
      lookup_(metrics->ForIndexOp(index_->backend(), "lookup")),
      insert_(metrics->ForIndexOp(index_->backend(), "insert")),
      release_(metrics->ForIndexOp(index_->backend(), "release")),
      hints_(metrics->ForIndexOp(index_->backend(), "hints")),
      health_(metrics->ForIndexOp(index_->backend(), "health")) {}

absl::Status InstrumentedIndex::Health() {
  return Measure(health_, [&] { return index_->Health(); });
}

absl::StatusOr<std::vector<bool>> InstrumentedIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  return Measure(lookup_, [&] { return index_->Lookup(ns, fingerprints); });
}

absl::StatusOr<std::vector<index::InsertResult>> InstrumentedIndex::Insert(
    absl::string_view ns, absl::Span<const index::InsertEntry> entries,
    const index::WriteToken* token) {
  return Measure(insert_, [&] { return index_->Insert(ns, entries, token); });
}

absl::StatusOr<std::vector<uint64_t>> InstrumentedIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const index::WriteToken* token) {
  return Measure(release_,
                 [&] { return index_->Release(ns, fingerprints, token); });
}

absl::Status InstrumentedIndex::RecordNextSizes(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const index::NextSize> hints) {
  return Measure(
      hints_, [&] { return index_->RecordNextSizes(ns, params_key, hints); });
}

absl::StatusOr<std::vector<index::NextHints>> InstrumentedIndex::NextHintsOf(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  return Measure(hints_, [&] {
    return index_->NextHintsOf(ns, params_key, fingerprints);
  });
}

}  // namespace chunkd::service
