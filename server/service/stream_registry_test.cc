#include "service/stream_registry.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

using ::testing::HasSubstr;

class FakeStream : public ActiveStream {
 public:
  void Abort(const absl::Status& status) override { aborted = status; }
  absl::Duration IdleFor(absl::Time) override { return absl::ZeroDuration(); }
  absl::Status aborted;
};

TEST(StreamRegistryTest, GlobalLimitCountsAdmittedStreamsOnly) {
  StreamRegistry registry({/*max_streams=*/2, 0, 0, 0});
  FakeStream a, b, c, d;
  EXPECT_TRUE(registry.Admit(&a, {}).status.ok());
  EXPECT_TRUE(registry.Admit(&b, {}).status.ok());
  for (int i = 0; i < 5; ++i) {  // refusals take no slot
    Admission refused = registry.Admit(&c, {});
    EXPECT_EQ(refused.status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(refused.reason, RejectReason::kLimit);
    EXPECT_THAT(std::string(refused.status.message()),
                HasSubstr("--max_streams"));
  }
  EXPECT_EQ(registry.active(), 2u);
  registry.Remove(&a);
  registry.Remove(&a);  // twice is harmless
  EXPECT_EQ(registry.active(), 1u);
  EXPECT_TRUE(registry.Admit(&d, {}).status.ok());
  EXPECT_EQ(registry.admitted(), 3u);
}

TEST(StreamRegistryTest, PerTokenLimitLeavesOtherTokensTheirSlots) {
  StreamRegistry registry({/*max_streams=*/10, /*per_token=*/2, 0, 0});
  std::vector<FakeStream> streams(6);
  EXPECT_TRUE(registry.Admit(&streams[0], {"alpha", "", ""}).status.ok());
  EXPECT_TRUE(registry.Admit(&streams[1], {"alpha", "", ""}).status.ok());
  Admission refused = registry.Admit(&streams[2], {"alpha", "", ""});
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.reason, RejectReason::kPerTokenLimit);
  EXPECT_THAT(std::string(refused.status.message()),
              HasSubstr("--max_streams_per_token"));
  EXPECT_TRUE(registry.Admit(&streams[3], {"beta", "", ""}).status.ok());
  registry.Remove(&streams[0]);
  EXPECT_TRUE(registry.Admit(&streams[4], {"alpha", "", ""}).status.ok());
  // No token (auth off): only the global limit applies.
  EXPECT_TRUE(registry.Admit(&streams[5], {}).status.ok());
}

TEST(StreamRegistryTest, PerIpLimit) {
  StreamRegistry registry({0, 0, /*per_ip=*/1, 0});
  FakeStream a, b, c;
  EXPECT_TRUE(registry.Admit(&a, {"", "10.0.0.1", ""}).status.ok());
  Admission refused = registry.Admit(&b, {"", "10.0.0.1", ""});
  EXPECT_EQ(refused.reason, RejectReason::kPerIpLimit);
  EXPECT_THAT(std::string(refused.status.message()),
              HasSubstr("client 10.0.0.1 already runs 1 streams"));
  EXPECT_TRUE(registry.Admit(&c, {"", "10.0.0.2", ""}).status.ok());
}

TEST(StreamRegistryTest, PerConnectionLimitHoldsAgainstResets) {
  // A client that resets streams can open more than its SETTINGS limit;
  // chunkd counts them until it has ended them.
  StreamRegistry registry({/*max_streams=*/128, 0, 0, /*per_connection=*/2});
  std::vector<FakeStream> streams(4);
  const StreamOwner a{"", "", "ipv4:127.0.0.1:4000"};
  const StreamOwner b{"", "", "ipv4:127.0.0.1:4001"};
  EXPECT_TRUE(registry.Admit(&streams[0], a).status.ok());
  EXPECT_TRUE(registry.Admit(&streams[1], a).status.ok());
  Admission refused = registry.Admit(&streams[2], a);
  EXPECT_EQ(refused.reason, RejectReason::kPerConnectionLimit);
  EXPECT_THAT(std::string(refused.status.message()),
              HasSubstr("--max_streams_per_connection"));
  EXPECT_TRUE(registry.Admit(&streams[3], b).status.ok());
  registry.Remove(&streams[1]);
  EXPECT_TRUE(registry.Admit(&streams[2], a).status.ok());
}

TEST(StreamRegistryTest, ShutdownRefusesAndWaitSeesTheLastStreamGo) {
  StreamRegistry registry({});
  FakeStream a, b;
  ASSERT_TRUE(registry.Admit(&a, {}).status.ok());
  registry.BeginShutdown();
  Admission refused = registry.Admit(&b, {});
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.reason, RejectReason::kShutdown);
  EXPECT_FALSE(registry.WaitForStreams(absl::Now() + absl::Milliseconds(20)));
  registry.ForEach([](ActiveStream* s) { s->Abort(absl::CancelledError("x")); });
  EXPECT_EQ(a.aborted.code(), absl::StatusCode::kCancelled);
  registry.Remove(&a);
  EXPECT_TRUE(registry.WaitForStreams(absl::Now() + absl::Seconds(5)));
}

// The ErrorInfo a refusal carries to the client (platform/error_reason.h).
std::string InfoOf(const absl::Status& status) {
  auto info = status.GetPayload(kErrorInfoTypeUrl);
  return info.has_value() ? std::string(*info) : "";
}

TEST(StreamRegistryTest, RefusalsCarryTheirReasonFlagAndLimit) {
  StreamRegistry registry({/*max_streams=*/3, 1, 1, 1});
  FakeStream a, b;
  ASSERT_TRUE(registry.Admit(&a, {"tok", "10.0.0.1", "c1"}).status.ok());
  EXPECT_EQ(InfoOf(registry.Admit(&b, {"tok", "", ""}).status),
            EncodeErrorInfo(ErrorReason::kPerTokenStreamLimit,
                            {{"flag", "--max_streams_per_token"},
                             {"limit", "1"}}));
  EXPECT_EQ(InfoOf(registry.Admit(&b, {"", "10.0.0.1", ""}).status),
            EncodeErrorInfo(ErrorReason::kPerIpStreamLimit,
                            {{"flag", "--max_streams_per_ip"},
                             {"limit", "1"}}));
  EXPECT_EQ(InfoOf(registry.Admit(&b, {"", "", "c1"}).status),
            EncodeErrorInfo(ErrorReason::kPerConnectionStreamLimit,
                            {{"flag", "--max_streams_per_connection"},
                             {"limit", "1"}}));
  FakeStream c, d;
  ASSERT_TRUE(registry.Admit(&b, {}).status.ok());
  ASSERT_TRUE(registry.Admit(&c, {}).status.ok());
  EXPECT_EQ(InfoOf(registry.Admit(&d, {}).status),
            EncodeErrorInfo(ErrorReason::kStreamLimit,
                            {{"flag", "--max_streams"}, {"limit", "3"}}));
  registry.BeginShutdown();
  EXPECT_EQ(InfoOf(registry.Admit(&d, {}).status),
            EncodeErrorInfo(ErrorReason::kShuttingDown, {}));
}

TEST(PeerIpTest, Forms) {
  EXPECT_EQ(PeerIp("ipv4:10.1.2.3:5000"), "10.1.2.3");
  EXPECT_EQ(PeerIp("ipv6:[::1]:5000"), "::1");
  EXPECT_EQ(PeerIp("ipv6:%5B2001:db8::7%5D:443"), "2001:db8::7");
  EXPECT_EQ(PeerIp("unix:/tmp/sock"), "unix:/tmp/sock");
}

TEST(RejectReasonTest, LabelsAreDistinct) {
  std::vector<std::string> labels;
  for (RejectReason r : kAllRejectReasons) labels.push_back(RejectReasonLabel(r));
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(std::unique(labels.begin(), labels.end()), labels.end());
  EXPECT_EQ(labels.size(), 9u);
}

}  // namespace
}  // namespace chunkd::service
