// The work of an Estimate stream (stream_work.h; docs/design.md, "The
// Estimate stream"): each task appends its pieces to the stream's
// estimate::Estimator, ending a file where a request said so, and sends an
// EstimateProgress now and then; the last finishes the estimate, looks the
// distinct chunks up in the namespace when one was given (read only) and
// sends the EstimateResult.
//
// Promises: nothing is written to the index; the estimator keeps at most
// ServiceOptions::estimate_max_entries distinct chunks, past which the
// stream fails with RESOURCE_EXHAUSTED and reason STREAM_MEMORY; an
// EstimateProgress comes once at least kProgressBytes more were cut since
// the last one, and after the first only when kProgressInterval has passed
// too (a few per second at most); the result comes last.
//
// Thread safety: a stream's work is used by one task at a time.
#ifndef CHUNKD_SERVICE_ESTIMATE_WORK_H_
#define CHUNKD_SERVICE_ESTIMATE_WORK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chunkd/v1/chunkd.pb.h"
#include "service/stream_work.h"

namespace chunkd::service {

struct ServiceOptions;

// Input bytes between two EstimateProgress messages, at least.
inline constexpr uint64_t kProgressBytes = uint64_t{16} << 20;
// Time between two of them after the first, at least.
inline constexpr absl::Duration kProgressInterval = absl::Milliseconds(250);
// Fingerprints per index lookup of a namespace comparison.
inline constexpr size_t kNamespaceLookupBatch = 1000;

// The work of a stream whose first request has `params`: INVALID_ARGUMENT
// naming the first bad parameter (EstimatorOptionsFromProto).
absl::StatusOr<std::unique_ptr<StreamWork>> MakeEstimateWork(
    const v1::EstimateParams& params, const ServiceOptions& service);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_ESTIMATE_WORK_H_
