// The stream memory a Chunk stream reserves once its parameters arrive
// (ChunkServiceImpl with ServiceOptions::stream_memory): a real service on
// loopback and a real client; however a stream ends, its reservation goes
// back, and a stream that waits for its turn leaves the queue when it ends.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "index/memory_index.h"
#include "metrics/metrics.h"
#include "pipeline/worker_pool.h"
#include "service/chunk_service.h"
#include "service/memory_budget.h"
#include "service/memory_plan.h"
#include "service/service_test_server.h"

namespace chunkd::service {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
using Stream = grpc::ClientReaderWriter<v1::ChunkRequest, v1::ChunkResponse>;

StreamSettings Settings() {
  StreamSettings settings;
  settings.window = WindowBytes(2);
  settings.max_message_bytes = 4 * kMiB;
  settings.max_inflight_bytes = 16 * kMiB;
  return settings;
}

// What a Chunk stream with fastcdc's default sizes reserves.
size_t DefaultStreamBytes() {
  return StreamMemoryBytes(
      ShapeOf(chunking::DefaultOptions(chunking::Algorithm::kFastCdc), false),
      Settings());
}

class StreamMemoryTest : public ::testing::Test {
 protected:
  // A server whose stream memory holds `streams` default streams, or
  // `bytes` when given.
  void Start(size_t streams, size_t bytes = 0) {
    stream_memory_ = std::make_unique<FairBudget>(
        bytes != 0 ? bytes : streams * DefaultStreamBytes());
    pool_ = std::make_unique<pipeline::WorkerPool>(2);
    ServiceOptions options;
    options.index = &index_;
    options.pool = pool_.get();
    options.metrics = &metrics_;
    options.memory = &budget_;
    options.stream_memory = stream_memory_.get();
    options.stream_settings = Settings();
    // Only ExpireIdleStreams() below ends idle streams: the reaper's own
    // clock never reaches an hour here.
    options.stream_idle_timeout = absl::Hours(1);
    options.engine.executor = pool_.get();
    service_ = std::make_unique<ChunkServiceImpl>(std::move(options));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::ChunkService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port),
        grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    pool_.reset();  // its tasks finish while the service exists
    service_.reset();
  }

  // Opens a Chunk stream and sends its parameters with `data`.
  std::unique_ptr<Stream> Open(grpc::ClientContext* context,
                               const std::string& data = "") {
    std::unique_ptr<Stream> stream = stub_->Chunk(context);
    v1::ChunkRequest first;
    first.mutable_params()->mutable_chunking()->set_algorithm(
        v1::ALGORITHM_FASTCDC);
    first.set_data(data);
    EXPECT_TRUE(stream->Write(first));
    return stream;
  }

  // Half-closes, reads every response; the status and bytes counted.
  grpc::Status Close(Stream* stream, uint64_t* total = nullptr) {
    stream->WritesDone();
    v1::ChunkResponse response;
    while (stream->Read(&response)) {
      if (response.has_summary() && total != nullptr) {
        *total = response.summary().total_bytes();
      }
    }
    return stream->Finish();
  }

  // Waits until no stream runs and every reservation is back (a stream
  // that failed while its task ran returns it when that task ends).
  void ExpectAllReturned() {
    ASSERT_TRUE(WaitFor([&] { return service_->active_streams() == 0; }));
    EXPECT_TRUE(WaitFor([&] { return stream_memory_->used() == 0; }))
        << stream_memory_->used();
    EXPECT_EQ(stream_memory_->waiting(), 0u);
    EXPECT_TRUE(WaitFor([&] { return budget_.used() == 0; }));
  }

  bool Reserved(size_t streams) {
    return WaitFor([&] {
      return stream_memory_->used() == streams * DefaultStreamBytes();
    });
  }

  metrics::Metrics metrics_{"test", "scalar"};
  index::MemoryIndex index_;
  MemoryBudget budget_{64 * kMiB};
  std::unique_ptr<FairBudget> stream_memory_;
  std::unique_ptr<pipeline::WorkerPool> pool_;
  std::unique_ptr<ChunkServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ChunkService::Stub> stub_;
};

TEST_F(StreamMemoryTest, AStreamThatEndsOkGivesItBack) {
  Start(1);
  grpc::ClientContext context;
  auto stream = Open(&context, std::string(100000, 'x'));
  ASSERT_TRUE(Reserved(1));
  uint64_t total = 0;
  EXPECT_TRUE(Close(stream.get(), &total).ok());
  EXPECT_EQ(total, 100000u);
  ExpectAllReturned();
}

TEST_F(StreamMemoryTest, AStreamEndedByAnErrorGivesItBack) {
  Start(1);
  grpc::ClientContext context;
  auto stream = Open(&context);
  ASSERT_TRUE(Reserved(1));
  v1::ChunkRequest again;  // params twice: INVALID_ARGUMENT
  again.mutable_params()->mutable_chunking()->set_algorithm(
      v1::ALGORITHM_FASTCDC);
  stream->Write(again);
  const grpc::Status status = Close(stream.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectAllReturned();
}

TEST_F(StreamMemoryTest, AStreamItsClientCancelsGivesItBack) {
  Start(1);
  grpc::ClientContext context;
  auto stream = Open(&context, "some bytes");
  ASSERT_TRUE(Reserved(1));
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectAllReturned();
}

TEST_F(StreamMemoryTest, AnIdleStreamEndedGivesItBack) {
  Start(1);
  grpc::ClientContext context;
  auto stream = Open(&context);
  ASSERT_TRUE(Reserved(1));
  // Waiting on its client (a read outstanding) for longer than the timeout.
  ASSERT_TRUE(WaitFor([&] {
    service_->ExpireIdleStreams(absl::Now() + absl::Hours(2));
    return service_->active_streams() == 0;
  }));
  const grpc::Status status = Close(stream.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "--stream_idle_timeout"))
      << status.error_message();
  ExpectAllReturned();
}

TEST_F(StreamMemoryTest, AStreamAbortedAtShutdownGivesItBack) {
  Start(1);
  grpc::ClientContext context;
  auto stream = Open(&context, "some bytes");
  ASSERT_TRUE(Reserved(1));
  service_->AbortAll(absl::UnavailableError("shutting down"));
  EXPECT_EQ(Close(stream.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  ExpectAllReturned();
}

// One default stream fits: the test's own reservation waits behind the
// first stream, a second stream waits behind it, reading nothing; the first
// ends and its memory passes on in turn; waiting is not idling. (The test
// holds the middle reservation itself so that, when idle streams are
// expired, the only stream is the one that waits.)
TEST_F(StreamMemoryTest, AStreamThatDoesNotFitWaitsItsTurn) {
  Start(1);
  grpc::ClientContext first_context, second_context;
  auto first = Open(&first_context);
  ASSERT_TRUE(Reserved(1));
  std::atomic<bool> granted{false};
  uint64_t ticket = 0;
  ASSERT_EQ(stream_memory_->Reserve(
                DefaultStreamBytes(), [&granted] { granted = true; }, &ticket),
            FairBudget::Outcome::kQueued);
  auto second = Open(&second_context, std::string(5000, 'y'));
  ASSERT_TRUE(WaitFor([&] { return stream_memory_->waiting() == 2; }));
  EXPECT_EQ(service_->active_streams(), 2u);
  // The first ends; its reservation passes to the next in turn, the test's.
  first_context.TryCancel();
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitFor([&] { return granted.load(); }));
  ASSERT_TRUE(WaitFor([&] { return service_->active_streams() == 1; }));
  EXPECT_EQ(stream_memory_->waiting(), 1u);
  // Queued, the second is not waiting on its client, however long.
  service_->ExpireIdleStreams(absl::Now() + absl::Hours(2));
  EXPECT_EQ(service_->active_streams(), 1u);
  EXPECT_EQ(stream_memory_->waiting(), 1u);
  // The test gives its reservation back: the second runs to its end.
  stream_memory_->Release(DefaultStreamBytes());
  ASSERT_TRUE(WaitFor([&] { return stream_memory_->waiting() == 0; }));
  EXPECT_EQ(stream_memory_->used(), DefaultStreamBytes());
  uint64_t total = 0;
  v1::ChunkRequest more;
  more.set_data(std::string(7000, 'z'));
  EXPECT_TRUE(second->Write(more));
  const grpc::Status second_status = Close(second.get(), &total);
  EXPECT_TRUE(second_status.ok()) << second_status.error_message();
  EXPECT_EQ(total, 12000u);
  ExpectAllReturned();
}

// A queued stream that ends, by each way a waiting stream can end, leaves
// the queue and holds nothing.
TEST_F(StreamMemoryTest, AWaitingStreamThatEndsLeavesTheQueue) {
  Start(1);
  grpc::ClientContext holder_context;
  auto holder = Open(&holder_context);
  ASSERT_TRUE(Reserved(1));
  {
    grpc::ClientContext context;
    auto waiting = Open(&context, "abc");
    ASSERT_TRUE(WaitFor([&] { return stream_memory_->waiting() == 1; }));
    context.TryCancel();
    EXPECT_EQ(waiting->Finish().error_code(), grpc::StatusCode::CANCELLED);
    ASSERT_TRUE(WaitFor([&] { return stream_memory_->waiting() == 0; }));
    EXPECT_EQ(stream_memory_->used(), DefaultStreamBytes());
  }
  {
    grpc::ClientContext context;
    auto waiting = Open(&context);
    ASSERT_TRUE(WaitFor([&] { return stream_memory_->waiting() == 1; }));
    // Shutdown aborts both, the holder and the waiting one.
    service_->AbortAll(absl::UnavailableError("shutting down"));
    EXPECT_EQ(Close(waiting.get()).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(Close(holder.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
  ExpectAllReturned();
}

TEST_F(StreamMemoryTest, AStreamThatCouldNeverFitIsRefusedAtOnce) {
  Start(0, DefaultStreamBytes() - 1);
  grpc::ClientContext context;
  auto stream = Open(&context, "abc");
  const grpc::Status status = Close(stream.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(
      absl::StrContains(status.error_message(), "--stream_memory_budget"))
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "could never start"))
      << status.error_message();
  ExpectAllReturned();
}

}  // namespace
}  // namespace chunkd::service
