// For the service's tests: a FingerprintIndex whose every call fails with
// UNAVAILABLE ("down"), as an unreachable Redis does once its failover wait
// is over. Wrapped in an InstrumentedIndex it gives what the service sees.
//
// Thread safety: stateless; safe from any thread.
#ifndef CHUNKD_SERVICE_DOWN_INDEX_FOR_TESTS_H_
#define CHUNKD_SERVICE_DOWN_INDEX_FOR_TESTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "index/fingerprint_index.h"

namespace chunkd::service {

class DownIndex final : public index::FingerprintIndex {
 public:
  absl::string_view backend() const override { return "down"; }
  absl::Status Health() override { return Down(); }
  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view, absl::Span<const std::string>) override {
    return Down();
  }
  absl::StatusOr<std::vector<index::InsertResult>> Insert(
      absl::string_view, absl::Span<const index::InsertEntry>,
      const index::WriteToken*) override {
    return Down();
  }
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view, absl::Span<const std::string>,
      const index::WriteToken*) override {
    return Down();
  }
  absl::Status RecordNextSizes(absl::string_view, absl::string_view,
                               absl::Span<const index::NextSize>) override {
    return Down();
  }
  absl::StatusOr<std::vector<index::NextHints>> NextHintsOf(
      absl::string_view, absl::string_view,
      absl::Span<const std::string>) override {
    return Down();
  }

 private:
  static absl::Status Down() { return absl::UnavailableError("down"); }
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_DOWN_INDEX_FOR_TESTS_H_
