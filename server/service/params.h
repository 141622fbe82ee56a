// Translation of the API's parameter messages into domain options, with every
// bound checked: parameters arrive over the network. Error messages name the
// field as it is spelled in chunkd.proto.
#ifndef CHUNKD_SERVICE_PARAMS_H_
#define CHUNKD_SERVICE_PARAMS_H_

#include "absl/status/statusor.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.pb.h"
#include "fingerprint/fingerprint.h"
#include "pipeline/rapid_cdc.h"

namespace chunkd::service {

// Unset fields take chunking::DefaultOptions(algorithm); the result is
// validated. INVALID_ARGUMENT names the field and its allowed range, or a
// field the algorithm does not use (CheckFieldsUsed).
absl::StatusOr<chunking::ChunkerOptions> ChunkerOptionsFromProto(
    const v1::ChunkingParams& params);

// OK unless the client set a field that `algorithm` does not read (e.g.
// normalization_level with crc32, min_size with fixed); INVALID_ARGUMENT
// naming the first such field and the ones the algorithm takes.
absl::Status CheckFieldsUsed(const v1::ChunkingParams& params,
                             chunking::Algorithm algorithm);

absl::StatusOr<fingerprint::Kind> FingerprintFromProto(
    v1::FingerprintAlgorithm algorithm);

v1::Algorithm AlgorithmToProto(chunking::Algorithm algorithm);

// GetServerInfo's entry of `algorithm`: its number, name, and the range and
// default of exactly the parameters it takes (chunking::ParametersOf) among
// the ranges AlgorithmInfo has; the others stay unset.
void FillAlgorithmInfo(chunking::Algorithm algorithm, v1::AlgorithmInfo* info);

// Dedup's hints: unset means FF+RWT+FPT for fastcdc and off otherwise; a
// test other than OFF with another algorithm is INVALID_ARGUMENT.
absl::StatusOr<pipeline::HintTest> HintTestFromProto(
    v1::HintTest hints, chunking::Algorithm algorithm);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_PARAMS_H_
