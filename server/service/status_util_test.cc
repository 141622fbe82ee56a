#include "service/status_util.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chunkd/v1/chunkd.pb.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "gtest/gtest.h"
#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// google.rpc.ErrorInfo as a client sees it, decoded with the protobuf
// runtime's generic parser (not with the encoder under test).
struct DecodedInfo {
  std::string reason;
  std::string domain;
  std::map<std::string, std::string> metadata;
};

DecodedInfo DecodeErrorInfo(const std::string& bytes) {
  UnknownFieldSet fields;
  EXPECT_TRUE(fields.ParseFromString(bytes));
  DecodedInfo info;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    EXPECT_EQ(f.type(), UnknownField::TYPE_LENGTH_DELIMITED);
    if (f.number() == 1) info.reason = f.length_delimited();
    if (f.number() == 2) info.domain = f.length_delimited();
    if (f.number() == 3) {
      UnknownFieldSet entry;
      EXPECT_TRUE(entry.ParseFromString(f.length_delimited()));
      EXPECT_EQ(entry.field_count(), 2);
      info.metadata[entry.field(0).length_delimited()] =
          entry.field(1).length_delimited();
    }
  }
  return info;
}

// The google.rpc.Status of `status`'s details: code, message and the
// details' Any messages.
struct DecodedStatus {
  int code = -1;
  std::string message;
  std::vector<google::protobuf::Any> details;
};

DecodedStatus DecodeDetails(const grpc::Status& status) {
  UnknownFieldSet fields;
  EXPECT_TRUE(fields.ParseFromString(status.error_details()));
  DecodedStatus out;
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    if (f.number() == 1) out.code = static_cast<int>(f.varint());
    if (f.number() == 2) out.message = f.length_delimited();
    if (f.number() == 3) {
      google::protobuf::Any any;
      EXPECT_TRUE(any.ParseFromString(f.length_delimited()));
      out.details.push_back(any);
    }
  }
  return out;
}

TEST(StatusUtilTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(WithReason(absl::OkStatus(), ErrorReason::kIndexFull).ok());
}

TEST(StatusUtilTest, StatusWithoutReasonHasNoDetails) {
  const grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError("bad"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "bad");
  EXPECT_TRUE(s.error_details().empty());
}

TEST(StatusUtilTest, ReasonTravelsAsErrorInfoInTheDetails) {
  const absl::Status refused = WithReason(
      absl::ResourceExhaustedError("chunkd is serving its limit"),
      ErrorReason::kStreamLimit,
      {{"flag", "--max_streams"}, {"limit", "1"}});
  const grpc::Status s = ToGrpcStatus(refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "chunkd is serving its limit");

  const DecodedStatus details = DecodeDetails(s);
  EXPECT_EQ(details.code, static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  EXPECT_EQ(details.message, s.error_message());
  ASSERT_EQ(details.details.size(), 1u);
  EXPECT_EQ(details.details[0].type_url(),
            "type.googleapis.com/google.rpc.ErrorInfo");
  const DecodedInfo info = DecodeErrorInfo(details.details[0].value());
  EXPECT_EQ(info.reason, "STREAM_LIMIT");
  EXPECT_EQ(info.domain, "chunkd.dev");
  const std::map<std::string, std::string> want = {{"flag", "--max_streams"},
                                                   {"limit", "1"}};
  EXPECT_EQ(info.metadata, want);
}

TEST(StatusUtilTest, LongMessagesAreTruncatedAlikeInTheDetails) {
  const std::string long_message(5000, 'x');
  const grpc::Status s = ToGrpcStatus(WithReason(
      absl::UnavailableError(long_message), ErrorReason::kIndexUnavailable));
  EXPECT_EQ(s.error_message().size(), kMaxErrorMessageBytes);
  EXPECT_TRUE(absl::EndsWith(s.error_message(), "..."));
  const DecodedStatus details = DecodeDetails(s);
  EXPECT_EQ(details.code, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_EQ(details.message, s.error_message());
  ASSERT_EQ(details.details.size(), 1u);
  EXPECT_EQ(DecodeErrorInfo(details.details[0].value()).reason,
            "INDEX_UNAVAILABLE");
}

TEST(StatusUtilTest, ALaterReasonReplacesAnEarlierOne) {
  const absl::Status s =
      WithReason(WithReason(absl::ResourceExhaustedError("full"),
                            ErrorReason::kIndexFull),
                 ErrorReason::kTokenLimit);
  const DecodedStatus details = DecodeDetails(ToGrpcStatus(s));
  ASSERT_EQ(details.details.size(), 1u);
  EXPECT_EQ(DecodeErrorInfo(details.details[0].value()).reason, "TOKEN_LIMIT");
}

TEST(StatusUtilTest, LongMetadataValuesEncodeTheirLength) {
  // Lengths of 128 and more take two varint bytes.
  const std::string value(300, 'v');
  const absl::Status s = WithReason(absl::ResourceExhaustedError("m"),
                                    ErrorReason::kCallRate, {{"k", value}});
  const DecodedStatus details = DecodeDetails(ToGrpcStatus(s));
  ASSERT_EQ(details.details.size(), 1u);
  EXPECT_EQ(DecodeErrorInfo(details.details[0].value()).metadata.at("k"),
            value);
}

// The reason strings are the proto enum's value names without the prefix,
// every value but UNSPECIFIED has one, and the numbers agree.
TEST(StatusUtilTest, ReasonsAreTheProtoEnumsValues) {
  const google::protobuf::EnumDescriptor* e = v1::ErrorReason_descriptor();
  ASSERT_EQ(static_cast<size_t>(e->value_count()),
            std::size(kAllErrorReasons) + 1);
  EXPECT_EQ(e->value(0)->name(), "ERROR_REASON_UNSPECIFIED");
  for (ErrorReason reason : kAllErrorReasons) {
    const auto* value = e->FindValueByNumber(static_cast<int>(reason));
    ASSERT_NE(value, nullptr) << ErrorReasonName(reason);
    EXPECT_EQ(value->name(),
              absl::StrCat("ERROR_REASON_", ErrorReasonName(reason)));
  }
}

}  // namespace
}  // namespace chunkd::service
