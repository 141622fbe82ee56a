#include "clients/cli/error_reason.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "platform/error_reason.h"

namespace chunkd::cli {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// The first length-delimited field `number` of the message `bytes`, or ""
// (also when `bytes` is not a message).
std::string BytesField(const std::string& bytes, int number) {
  UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return "";
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED) {
      return f.length_delimited();
    }
  }
  return "";
}

}  // namespace

absl::Status WithErrorInfo(absl::Status status, const grpc::Status& from) {
  if (status.ok() || from.error_details().empty()) return status;
  // google.rpc.Status: details = 3, each a google.protobuf.Any.
  UnknownFieldSet fields;
  if (!fields.ParseFromString(from.error_details())) return status;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() != 3 || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    google::protobuf::Any any;
    if (any.ParseFromString(f.length_delimited()) &&
        any.type_url() == kErrorInfoTypeUrl) {
      status.SetPayload(kErrorInfoTypeUrl, absl::Cord(any.value()));
      break;
    }
  }
  return status;
}

std::string ReasonOf(const absl::Status& status) {
  const auto info = status.GetPayload(kErrorInfoTypeUrl);  // absl::optional
  if (!info.has_value()) return "";
  return BytesField(std::string(*info), 1);  // ErrorInfo.reason
}

std::string ReasonSuffix(const absl::Status& status) {
  const std::string reason = ReasonOf(status);
  return reason.empty() ? "" : absl::StrCat(" [reason: ", reason, "]");
}

}  // namespace chunkd::cli
