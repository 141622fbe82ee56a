#include "service/status_util.h"

#include <cstdint>

#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

// The wire encoding of google.rpc.Status{code = 1, message = 2, details = 3}
// with the ErrorInfo as its one detail, a google.protobuf.Any{type_url = 1,
// value = 2}.
std::string EncodeStatusDetails(int code, absl::string_view message,
                                absl::string_view error_info) {
  using error_reason_internal::AppendBytesField;
  std::string out;
  // code: field 1, varint (wire type 0).
  out.push_back(static_cast<char>(1 << 3));
  for (uint32_t v = static_cast<uint32_t>(code);; v >>= 7) {
    if (v < 0x80) {
      out.push_back(static_cast<char>(v));
      break;
    }
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  }
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
