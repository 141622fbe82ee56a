#include "service/status_util.h"

#include <cstdint>
#include <string>

#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

// The wire encoding of google.rpc.Status{code = 1, message = 2, details = 3}
// with the ErrorInfo as its one detail, a google.protobuf.Any{type_url = 1,
// value = 2}.
std::string EncodeStatusDetails(int code, absl::string_view message,
                                absl::string_view error_info) {
  using error_reason_internal::AppendBytesField;
  using error_reason_internal::AppendVarint;
  std::string out;
  // code: field 1, a varint (wire type 0); codes are never negative.
  AppendVarint(1 << 3, &out);
  AppendVarint(static_cast<uint32_t>(code), &out);
  AppendBytesField(2, message, &out);
  std::string any;
  AppendBytesField(1, kErrorInfoTypeUrl, &any);
  AppendBytesField(2, error_info, &any);
  AppendBytesField(3, any, &out);
  return out;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxErrorMessageBytes) {
    message.resize(kMaxErrorMessageBytes - 3);
    message += "...";
  }
  const auto code = static_cast<grpc::StatusCode>(status.code());
  const auto info = status.GetPayload(kErrorInfoTypeUrl);  // absl::optional
  if (!info.has_value()) return grpc::Status(code, message);
  return grpc::Status(
      code, message,
      EncodeStatusDetails(status.raw_code(), message, std::string(*info)));
}

}  // namespace chunkd::service
