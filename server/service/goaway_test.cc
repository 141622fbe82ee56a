#include "service/goaway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "service/connection_guard.h"

namespace chunkd::service {
namespace {

// Bound on every wait of these tests.
constexpr std::chrono::seconds kWait(30);

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + kWait;
}

// errno of a TCP connection attempt to 127.0.0.1:port (0: connected).
int ConnectError(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int result =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int error = result == 0 ? 0 : errno;
  close(fd);
  return error;
}

TEST(GoAwayTest, ClosesTheListenerAndMovesTheClientsOff) {
  grpc::CallbackGenericService generic;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterCallbackGenericService(&generic);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(Deadline()));
  EXPECT_EQ(CountConnections(port), 1);

  ASSERT_TRUE(GoAway(*server));
  // The client left its connection at the GOAWAY, and finds no listener.
  ASSERT_TRUE(channel->WaitForStateChange(GRPC_CHANNEL_READY, Deadline()));
  EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_EQ(ConnectError(port), ECONNREFUSED);
  // Its acknowledgement of the GOAWAY's PING brought the final GOAWAY, and
  // the connection, without a stream, closed.
  const absl::Time until = absl::Now() + absl::FromChrono(kWait);
  while (CountConnections(port) > 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(CountConnections(port), 0);

  server->Shutdown(Deadline());
  server->Wait();
}

}  // namespace
}  // namespace chunkd::service
