// Why chunkd refused a call, in a form a client can tell apart without
// reading the message: a google.rpc.ErrorInfo (reason, domain "chunkd.dev",
// metadata) carried by an absl::Status as a payload from the place that
// decides the refusal to the one place that builds the gRPC status
// (service/status_util.h), which sends it in the status details. The
// reasons are the values of chunkd.v1.ErrorReason (proto/chunkd/v1/
// chunkd.proto) without their ERROR_REASON_ prefix; docs/clients.md,
// "Error reasons", lists them.
//
// In the platform, the leaf below every layer that refuses (the index, the
// service, main), and without protobuf, which the index does not link: the
// payload is the ErrorInfo's wire encoding, written here by hand, under its
// type URL, as absl::Status payloads are meant to be. Encoding is all this
// header does; the clients decode with the protobuf runtime.
//
// Thread safety: pure functions.
#ifndef CHUNKD_PLATFORM_ERROR_REASON_H_
#define CHUNKD_PLATFORM_ERROR_REASON_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace chunkd {

// The values of chunkd.v1.ErrorReason, in its order (a test holds them
// equal).
enum class ErrorReason {
  kStreamLimit = 1,
  kPerTokenStreamLimit,
  kPerIpStreamLimit,
  kPerConnectionStreamLimit,
  kCallRate,
  kIdleTimeout,
  kMessageTooLarge,
  kStreamMemory,
  kIndexFull,
  kTokenLimit,
  kUnauthenticated,
  kPermissionDenied,
  kShuttingDown,
  kIndexUnavailable,
};
inline constexpr ErrorReason kAllErrorReasons[] = {
    ErrorReason::kStreamLimit,       ErrorReason::kPerTokenStreamLimit,
    ErrorReason::kPerIpStreamLimit,  ErrorReason::kPerConnectionStreamLimit,
    ErrorReason::kCallRate,          ErrorReason::kIdleTimeout,
    ErrorReason::kMessageTooLarge,   ErrorReason::kStreamMemory,
    ErrorReason::kIndexFull,         ErrorReason::kTokenLimit,
    ErrorReason::kUnauthenticated,   ErrorReason::kPermissionDenied,
    ErrorReason::kShuttingDown,      ErrorReason::kIndexUnavailable};

// ErrorInfo.domain of every reason chunkd sends.
inline constexpr absl::string_view kErrorDomain = "chunkd.dev";
// The payload's key: the type URL of google.rpc.ErrorInfo.
inline constexpr absl::string_view kErrorInfoTypeUrl =
    "type.googleapis.com/google.rpc.ErrorInfo";

// The ErrorInfo.reason string: "STREAM_LIMIT", "INDEX_FULL", ...
inline const char* ErrorReasonName(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kStreamLimit:
      return "STREAM_LIMIT";
    case ErrorReason::kPerTokenStreamLimit:
      return "PER_TOKEN_STREAM_LIMIT";
    case ErrorReason::kPerIpStreamLimit:
      return "PER_IP_STREAM_LIMIT";
    case ErrorReason::kPerConnectionStreamLimit:
      return "PER_CONNECTION_STREAM_LIMIT";
    case ErrorReason::kCallRate:
      return "CALL_RATE";
    case ErrorReason::kIdleTimeout:
      return "IDLE_TIMEOUT";
    case ErrorReason::kMessageTooLarge:
      return "MESSAGE_TOO_LARGE";
    case ErrorReason::kStreamMemory:
      return "STREAM_MEMORY";
    case ErrorReason::kIndexFull:
      return "INDEX_FULL";
    case ErrorReason::kTokenLimit:
      return "TOKEN_LIMIT";
    case ErrorReason::kUnauthenticated:
      return "UNAUTHENTICATED";
    case ErrorReason::kPermissionDenied:
      return "PERMISSION_DENIED";
    case ErrorReason::kShuttingDown:
      return "SHUTTING_DOWN";
    case ErrorReason::kIndexUnavailable:
      return "INDEX_UNAVAILABLE";
  }
  return "UNSPECIFIED";
}

// One ErrorInfo.metadata entry: e.g. {"flag", "--max_streams"}.
using ReasonMetadata = std::pair<absl::string_view, std::string>;

namespace error_reason_internal {

// Protobuf wire format: a base-128 varint.
inline void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Protobuf wire format: a length-delimited field (wire type 2).
inline void AppendBytesField(uint32_t field, absl::string_view bytes,
                             std::string* out) {
  AppendVarint((uint64_t{field} << 3) | 2, out);
  AppendVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

}  // namespace error_reason_internal

// The wire encoding of google.rpc.ErrorInfo{reason, domain, metadata}
// (fields 1, 2 and 3, the map's entries key 1, value 2).
inline std::string EncodeErrorInfo(
    ErrorReason reason, std::initializer_list<ReasonMetadata> metadata) {
  using error_reason_internal::AppendBytesField;
  std::string out;
  AppendBytesField(1, ErrorReasonName(reason), &out);
  AppendBytesField(2, kErrorDomain, &out);
  for (const ReasonMetadata& entry : metadata) {
    std::string pair;
    AppendBytesField(1, entry.first, &pair);
    AppendBytesField(2, entry.second, &pair);
    AppendBytesField(3, pair, &out);
  }
  return out;
}

// `status` marked with `reason` (and `metadata`, e.g. the flag and the limit
// that refused). An OK status stays OK; a reason already set is replaced.
inline absl::Status WithReason(absl::Status status, ErrorReason reason,
                               std::initializer_list<ReasonMetadata> metadata =
                                   {}) {
  if (status.ok()) return status;
  status.SetPayload(kErrorInfoTypeUrl,
                    absl::Cord(EncodeErrorInfo(reason, metadata)));
  return status;
}

// The RESOURCE_EXHAUSTED refusal `message` of a limit: marked with `reason`
// and, as metadata, the `flag` that sets the limit and the `limit`.
inline absl::Status LimitRefusal(ErrorReason reason, absl::string_view flag,
                                 std::string limit, std::string message) {
  return WithReason(absl::ResourceExhaustedError(message), reason,
                    {{"flag", std::string(flag)}, {"limit", std::move(limit)}});
}

// True when `status` carries a reason.
inline bool HasReason(const absl::Status& status) {
  return status.GetPayload(kErrorInfoTypeUrl).has_value();
}

}  // namespace chunkd

#endif  // CHUNKD_PLATFORM_ERROR_REASON_H_
