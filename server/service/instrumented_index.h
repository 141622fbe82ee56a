// InstrumentedIndex: a FingerprintIndex decorator that counts and times every
// call of the index it wraps, whatever its backend, in
// chunkd_index_requests_total{backend,op,result} and
// chunkd_index_request_duration_seconds{backend,op}.
//
// op: lookup (Lookup), insert (Insert), release (Release), hints
// (RecordNextSizes and NextHintsOf) and health (Health); result: ok or error
// (any non-OK status). Every op x result series of the wrapped backend
// exists from construction, at zero. Results pass through unchanged, but for
// the reason of an error (platform/error_reason.h) the backend did not name:
// RESOURCE_EXHAUSTED gets INDEX_FULL, UNAVAILABLE INDEX_UNAVAILABLE.
//
// Thread safety: as thread-safe as the wrapped index (every backend is).
#ifndef CHUNKD_SERVICE_INSTRUMENTED_INDEX_H_
#define CHUNKD_SERVICE_INSTRUMENTED_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "index/fingerprint_index.h"
#include "metrics/metrics.h"

namespace chunkd::service {

// The label values of chunkd_index_requests_total{op}.
inline constexpr const char* kIndexOps[] = {"lookup", "insert", "release",
                                            "hints", "health"};

class InstrumentedIndex final : public index::FingerprintIndex {
 public:
  // REQUIRES: index and metrics not null; metrics outlives this object.
  InstrumentedIndex(std::unique_ptr<index::FingerprintIndex> index,
                    metrics::Metrics* metrics);
  InstrumentedIndex(const InstrumentedIndex&) = delete;
  InstrumentedIndex& operator=(const InstrumentedIndex&) = delete;

  index::FingerprintIndex* wrapped() const { return index_.get(); }

  absl::string_view backend() const override { return index_->backend(); }
  void StopWaiting() override { index_->StopWaiting(); }
  std::optional<WaitCounts> FailoverWaits() override {
    return index_->FailoverWaits();
  }
  std::optional<uint64_t> EntryCount() override {
    return index_->EntryCount();
  }
  std::optional<StorageStats> Storage() override { return index_->Storage(); }
  absl::StatusOr<std::string> Checkpoint() override {
    return index_->Checkpoint();
  }
  absl::Status Health() override;
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns,
      absl::Span<const std::string> fingerprints) override;
  using index::FingerprintIndex::Insert;
  absl::StatusOr<std::vector<index::InsertResult>> Insert(
      absl::string_view ns, absl::Span<const index::InsertEntry> entries,
      const index::WriteToken* token) override;
  using index::FingerprintIndex::Release;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const index::WriteToken* token) override;
  absl::Status RecordNextSizes(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const index::NextSize> hints) override;
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) override;

 private:
  std::unique_ptr<index::FingerprintIndex> index_;
  metrics::IndexOpMetrics lookup_, insert_, release_, hints_, health_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_INSTRUMENTED_INDEX_H_
