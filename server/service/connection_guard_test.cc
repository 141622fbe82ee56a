#include "service/connection_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "platform/error_reason.h"

namespace chunkd::service {
namespace {

using Verdict = StreamRateLimiter::Verdict;

TEST(StreamRateLimiterTest, AdmitsABurstOfTheRateThenRefuses) {
  StreamRateLimiter limiter(10);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(limiter.OnNewStream("c", t0), Verdict::kAdmit) << i;
  }
  EXPECT_FALSE(limiter.OverRate("c"));
  EXPECT_EQ(limiter.OnNewStream("c", t0), Verdict::kRefuse);
  EXPECT_TRUE(limiter.OverRate("c"));
  // Another connection has its own bucket.
  EXPECT_EQ(limiter.OnNewStream("d", t0), Verdict::kAdmit);
  // A tenth of a second refills one stream.
  EXPECT_EQ(limiter.OnNewStream("c", t0 + absl::Milliseconds(100)),
            Verdict::kAdmit);
  EXPECT_FALSE(limiter.OverRate("c"));
}

TEST(StreamRateLimiterTest, SteadyRateBelowTwiceTheLimitIsNeverClosed) {
  StreamRateLimiter limiter(100);
  absl::Time t = absl::FromUnixSeconds(1000);
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {  // 150 per second for 20 s
    t += absl::Milliseconds(1000.0 / 150);
    const Verdict v = limiter.OnNewStream("c", t);
    ASSERT_NE(v, Verdict::kClose) << i;
    refused += v == Verdict::kRefuse;
  }
  EXPECT_GT(refused, 800);  // a third refused, roughly
}

TEST(StreamRateLimiterTest, FloodIsClosedOnceAfterASecondsWorthOfDebt) {
  StreamRateLimiter limiter(100);
  absl::Time t = absl::FromUnixSeconds(1000);
  int closed_at = -1;
  for (int i = 0; i < 1000; ++i) {  // 10,000 per second
    t += absl::Microseconds(100);
    if (limiter.OnNewStream("c", t) == Verdict::kClose) {
      EXPECT_EQ(closed_at, -1) << "closed twice";
      closed_at = i;
    }
  }
  // 100 admitted from the full bucket, then refusals accrue debt at almost
  // the arrival rate until it reaches 100.
  EXPECT_GT(closed_at, 195);
  EXPECT_LT(closed_at, 215);
}

TEST(StreamRateLimiterTest, ForgetsIdleConnections) {
  StreamRateLimiter limiter(10);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  limiter.OnNewStream("a", t0);
  limiter.OnNewStream("b", t0);
  EXPECT_EQ(limiter.size(), 2u);
  limiter.OnNewStream("a", t0 + absl::Seconds(11));
  EXPECT_EQ(limiter.size(), 1u);
}

// A connected pair on loopback: the accepted end is "the server's".
struct Loopback {
  int listener = -1, client = -1, server = -1;
  int port = 0;
  std::string client_peer;  // as gRPC names it

  Loopback() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(addr);
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), size) != 0 ||
        listen(listener, 4) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
      return;
    }
    port = ntohs(addr.sin_port);
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&addr), size) != 0) return;
    server = accept(listener, nullptr, nullptr);
    sockaddr_in local = {};
    size = sizeof(local);
    getsockname(client, reinterpret_cast<sockaddr*>(&local), &size);
    client_peer = absl::StrCat("ipv4:127.0.0.1:", ntohs(local.sin_port));
  }
  ~Loopback() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(ConnectionGuardTest, RateErrorNamesTheFlagAndCarriesItsReason) {
  ConnectionGuard guard(5, [](const std::string&) {});
  const absl::Status refused = guard.RateError("calls");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "this connection opens calls faster than 5 per second "
            "(--max_stream_rate_per_connection); slow down, or the connection "
            "is closed");
  auto info = refused.GetPayload(kErrorInfoTypeUrl);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(std::string(*info),
            EncodeErrorInfo(ErrorReason::kCallRate,
                            {{"flag", "--max_stream_rate_per_connection"},
                             {"limit", "5"}}));
}

TEST(ShutdownConnectionTest, ShutsDownTheAcceptedSocketOfThatPeerOnly) {
  Loopback a, b;
  ASSERT_GE(a.server, 0);
  ASSERT_GE(b.server, 0);
  // Wrong local port: nothing is touched.
  EXPECT_EQ(ShutdownConnection(a.client_peer, b.port), 0);
  EXPECT_EQ(ShutdownConnection(a.client_peer, a.port), 1);
  char byte;
  // The client sees the end of the stream; the other connection lives.
  EXPECT_EQ(recv(a.client, &byte, 1, 0), 0);
  ASSERT_EQ(send(b.client, "x", 1, MSG_NOSIGNAL), 1);
  EXPECT_EQ(recv(b.server, &byte, 1, 0), 1);
}

TEST(ShutdownConnectionTest, UnknownPeersCloseNothing) {
  Loopback a;
  ASSERT_GE(a.server, 0);
  EXPECT_EQ(ShutdownConnection("unix:/tmp/x", a.port), 0);
  EXPECT_EQ(ShutdownConnection("ipv4:127.0.0.1:notaport", a.port), 0);
  EXPECT_EQ(ShutdownConnection(a.client_peer, 0), 0);
}

TEST(CountConnectionsTest, CountsTheOpenAcceptedSocketsOfThePort) {
  Loopback a, b;
  ASSERT_GE(a.server, 0);
  ASSERT_GE(b.server, 0);
  // The listener and the client's end are not accepted sockets of the port.
  EXPECT_EQ(CountConnections(a.port), 1);
  EXPECT_EQ(CountConnections(b.port), 1);
  EXPECT_EQ(CountConnections(0), 0);
  close(a.server);
  a.server = -1;
  EXPECT_EQ(CountConnections(a.port), 0);
  EXPECT_EQ(CountConnections(b.port), 1);
}

}  // namespace
}  // namespace chunkd::service
