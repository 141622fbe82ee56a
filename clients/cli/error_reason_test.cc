#include "clients/cli/error_reason.h"

#include <string>

#include "gtest/gtest.h"
#include "platform/error_reason.h"

namespace chunkd::cli {
namespace {

using error_reason_internal::AppendBytesField;

// A google.rpc.Status's details holding one Any of `type_url` and `value`.
std::string Details(absl::string_view type_url, absl::string_view value) {
  std::string any;
  AppendBytesField(1, type_url, &any);
  AppendBytesField(2, value, &any);
  std::string out;
  AppendBytesField(2, "message", &out);
  AppendBytesField(3, any, &out);
  return out;
}

TEST(ErrorReasonTest, ReadsTheReasonOfTheDetails) {
  const grpc::Status from(
      grpc::StatusCode::RESOURCE_EXHAUSTED, "full",
      Details(kErrorInfoTypeUrl,
              EncodeErrorInfo(ErrorReason::kIndexFull, {{"flag", "x"}})));
  const absl::Status status =
      WithErrorInfo(absl::ResourceExhaustedError("full"), from);
  EXPECT_EQ(ReasonOf(status), "INDEX_FULL");
  EXPECT_EQ(ReasonSuffix(status), " [reason: INDEX_FULL]");
}

TEST(ErrorReasonTest, NoReasonWithoutAnErrorInfo) {
  const absl::Status plain = absl::UnavailableError("down");
  EXPECT_EQ(ReasonOf(WithErrorInfo(plain, grpc::Status(
                                              grpc::StatusCode::UNAVAILABLE,
                                              "down"))),
            "");
  // Another detail type, and details that are no message.
  EXPECT_EQ(ReasonOf(WithErrorInfo(
                plain, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down",
                                    Details("type.googleapis.com/x.Y", "z")))),
            "");
  EXPECT_EQ(ReasonOf(WithErrorInfo(
                plain, grpc::Status(grpc::StatusCode::UNAVAILABLE, "down",
                                    std::string("\xff\xff\xff", 3)))),
            "");
  EXPECT_EQ(ReasonSuffix(plain), "");
}

}  // namespace
}  // namespace chunkd::cli
