// The Estimate stream's parameters and answers (docs/design.md, "The
// Estimate stream"): EstimateParams checked and turned into
// estimate::EstimatorOptions, and the Estimator's results into
// EstimateResult. Error messages name the field as chunkd.proto spells it
// and, for a set, its index and label.
//
// Thread safety: pure functions.
#ifndef CHUNKD_SERVICE_ESTIMATE_PARAMS_H_
#define CHUNKD_SERVICE_ESTIMATE_PARAMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.pb.h"
#include "estimate/estimator.h"

namespace chunkd::service {

// 1..estimate::kMaxSets sets, labels of at most kMaxLabelBytes, each set's
// chunking as Chunk takes it (ChunkerOptionsFromProto), sample_rate 0 or 1
// (exact) up to kMaxSampleRate, a fingerprint other than NONE (unset: XXH128,
// or SHA256 with a namespace) and a namespace as Dedup takes it, when given.
// INVALID_ARGUMENT naming the first problem. `engine` and `max_entries` are
// copied into the result as they are.
absl::StatusOr<estimate::EstimatorOptions> EstimatorOptionsFromProto(
    const v1::EstimateParams& params, const chunking::EngineOptions& engine,
    uint64_t max_entries);

// Every parameter `options.algorithm` takes, defaults filled in.
void ChunkingParamsToProto(const chunking::ChunkerOptions& options,
                           v1::ChunkingParams* params);

// One set's result as SetEstimate, namespace fields left unset.
void SetEstimateToProto(const estimate::SetResult& result,
                        v1::SetEstimate* out);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_ESTIMATE_PARAMS_H_
