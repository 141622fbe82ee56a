// The reason of a refusal of chunkd (docs/clients.md, "Error reasons"), as
// chunkctl reads it: the google.rpc.ErrorInfo the server puts in the status
// details of a failed call, kept on the absl::Status chunkctl makes of it
// (as a payload under the ErrorInfo's type URL, as the server itself keeps
// it; server/platform/error_reason.h) until the error line prints it.
//
// Thread safety: pure functions.
#ifndef CHUNKD_CLIENTS_CLI_ERROR_REASON_H_
#define CHUNKD_CLIENTS_CLI_ERROR_REASON_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace chunkd::cli {

// `status` with the ErrorInfo of `from`'s details, when they hold one.
absl::Status WithErrorInfo(absl::Status status, const grpc::Status& from);

// The ErrorInfo reason `status` carries ("STREAM_LIMIT", ...); "" when none.
std::string ReasonOf(const absl::Status& status);

// " [reason: STREAM_LIMIT]" for a status with a reason, else "": the end of
// an error line.
std::string ReasonSuffix(const absl::Status& status);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_ERROR_REASON_H_
