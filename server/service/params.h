// Translation of the API's parameter messages into domain options, with every
// bound checked: parameters arrive over the network. Error messages name the
// field as it is spelled in chunkd.proto.
#ifndef CHUNKD_SERVICE_PARAMS_H_
#define CHUNKD_SERVICE_PARAMS_H_

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.pb.h"
#include "fingerprint/fingerprint.h"

namespace chunkd::service {

// Unset fields take chunking::DefaultOptions(algorithm); the result is
// validated. INVALID_ARGUMENT names the field and its allowed range.
absl::StatusOr<chunking::ChunkerOptions> ChunkerOptionsFromProto(
    const v1::ChunkingParams& params);

absl::StatusOr<fingerprint::Kind> FingerprintFromProto(
    v1::FingerprintAlgorithm algorithm);

v1::Algorithm AlgorithmToProto(chunking::Algorithm algorithm);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_PARAMS_H_
