// The one place where absl::Status and grpc::Status meet. Codes keep their
// meaning (the numeric values are the same); long messages are truncated so a
// status never outgrows a trailer. A status marked with a reason
// (platform/error_reason.h) carries it to the client as a
// google.rpc.ErrorInfo in the status details (the grpc-status-details-bin
// trailer): a google.rpc.Status of the same code and message whose details
// hold the ErrorInfo as a google.protobuf.Any.
#ifndef CHUNKD_SERVICE_STATUS_UTIL_H_
#define CHUNKD_SERVICE_STATUS_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace chunkd::service {

// Longest error message sent to a client.
inline constexpr size_t kMaxErrorMessageBytes = 1024;

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STATUS_UTIL_H_
