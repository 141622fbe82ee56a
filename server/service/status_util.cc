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

}  // namespace chunkd::service
