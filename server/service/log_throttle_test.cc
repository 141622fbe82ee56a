#include "service/log_throttle.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

TEST(LogThrottleTest, OneLinePerKindWithCountAndLatestExample) {
  std::vector<std::string> lines;
  LogThrottle throttle(absl::Seconds(10),
                       [&](const std::string& line) { lines.push_back(line); });
  for (int i = 0; i < 500; ++i) {
    throttle.Note(kTlsHandshakeFailures, "reason " + std::to_string(i));
  }
  throttle.Note("connections closed", "ipv4:1.2.3.4:5");
  throttle.Flush();
  ASSERT_EQ(lines.size(), 2u);
  // In the order of the kinds' names.
  EXPECT_EQ(lines[0], "500 TLS handshakes failed in the last 10s (last: reason 499)");
  EXPECT_EQ(lines[1], "1 connections closed in the last 10s (last: ipv4:1.2.3.4:5)");
  throttle.Flush();  // nothing new: nothing printed
  EXPECT_EQ(lines.size(), 2u);
}

TEST(LogThrottleTest, RecognizesGrpcHandshakeFailures) {
  EXPECT_TRUE(IsHandshakeFailure(
      "Handshake failed with fatal error SSL_ERROR_SSL: error:0A00010B:SSL "
      "routines::wrong version number."));
  EXPECT_TRUE(IsHandshakeFailure("Security handshake failed: x"));
  EXPECT_FALSE(IsHandshakeFailure("Failed to bind to port"));
}

}  // namespace
}  // namespace chunkd::service
