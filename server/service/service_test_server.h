// For the in-process tests of ChunkServiceImpl: a real service on a real
// gRPC server listening on a loopback port chosen by the kernel, the memory
// index, a real worker pool and a generated stub as the client.
#ifndef CHUNKD_SERVICE_SERVICE_TEST_SERVER_H_
#define CHUNKD_SERVICE_SERVICE_TEST_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "index/memory_index.h"
#include "metrics/metrics.h"
#include "pipeline/worker_pool.h"
#include "service/chunk_service.h"
#include "service/memory_budget.h"

namespace chunkd::service {

// Bound on every wait for the server to reach a state, and the deadline of
// every call: a safety net that ends a broken test, never what it asserts.
inline constexpr absl::Duration kTestWait = absl::Seconds(120);

// Waits (bounded by kTestWait) until `condition` holds; false if it never
// did.
template <typename Condition>
bool WaitFor(Condition condition) {
  const absl::Time deadline = absl::Now() + kTestWait;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

// Expects status `code` with every one of `parts` in its message.
inline void ExpectRefused(const grpc::Status& status, grpc::StatusCode code,
                          const std::vector<std::string>& parts) {
  EXPECT_EQ(status.error_code(), code) << status.error_message();
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(status.error_message(), part))
        << status.error_message() << " lacks " << part;
  }
}

class TestServer {
 public:
  // `adjust` may change the options before the service is built; the index,
  // pool, metrics and memory budget are set already.
  explicit TestServer(
      const std::function<void(ServiceOptions*)>& adjust = nullptr)
      : pool_(std::make_unique<pipeline::WorkerPool>(2)) {
    ServiceOptions options;
    options.index = &index_;
    options.pool = pool_.get();
    options.metrics = &metrics_;
    options.memory = &budget_;
    options.version = "9.8.7";
    options.engine.executor = pool_.get();
    if (adjust) adjust(&options);
    service_ = std::make_unique<ChunkServiceImpl>(std::move(options));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    // Flow-control windows stay at their initial size, so that a client
    // that does not read stalls the server's writes early.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    stub_ = v1::ChunkService::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(),
        args));
  }

  ~TestServer() {
    server_->Shutdown();
    server_.reset();
    pool_.reset();  // its tasks finish while the service exists
    service_.reset();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  bool started() const { return server_ != nullptr; }
  v1::ChunkService::Stub& stub() { return *stub_; }
  ChunkServiceImpl& service() { return *service_; }
  index::MemoryIndex& index() { return index_; }
  metrics::Metrics& metrics() { return metrics_; }
  MemoryBudget& budget() { return budget_; }

  // A client context with kTestWait as its deadline (a safety net).
  static std::unique_ptr<grpc::ClientContext> Context(
      const std::string& token = "") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(absl::ToInt64Seconds(kTestWait)));
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
    return context;
  }

 private:
  metrics::Metrics metrics_{"test", "scalar"};
  index::MemoryIndex index_;
  MemoryBudget budget_{size_t{256} << 20};
  std::unique_ptr<pipeline::WorkerPool> pool_;
  std::unique_ptr<ChunkServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ChunkService::Stub> stub_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_SERVICE_TEST_SERVER_H_
