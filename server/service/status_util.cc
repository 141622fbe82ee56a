#include "service/status_util.h"

namespace chunkd::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxErrorMessageBytes) {
    message.resize(kMaxErrorMessageBytes - 3);
    message += "...";
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace chunkd::service
