// The stream reactor in process: a real ChunkServiceImpl on a loopback port,
// a generated stub as the client (service_test_server.h). Ordering,
// backpressure, cancellation and garbage in the middle of a stream.
// Backpressure is observed through the stream's state and the memory
// budget, never through time; deadlines are only a safety net.

#include "service/stream_reactor.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "fingerprint/fingerprint.h"
#include "gtest/gtest.h"
#include "service/memory_plan.h"
#include "service/service_test_server.h"
#include "service/stream_rpc.h"

namespace chunkd::service {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

using ChunkStream = grpc::ClientReaderWriter<v1::ChunkRequest, v1::ChunkResponse>;
using DedupStream = grpc::ClientReaderWriter<v1::DedupRequest, v1::DedupResponse>;

// `size` bytes from a fixed-seed generator.
std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(generator());
  return bytes;
}

// The first request of a Chunk stream.
v1::ChunkRequest ChunkParams(v1::Algorithm algorithm,
                             v1::FingerprintAlgorithm fingerprint,
                             uint32_t avg_size = 0) {
  v1::ChunkRequest request;
  v1::ChunkParams* params = request.mutable_params();
  params->mutable_chunking()->set_algorithm(algorithm);
  if (avg_size != 0) params->mutable_chunking()->set_avg_size(avg_size);
  params->set_fingerprint(fingerprint);
  return request;
}

// Sizes of the messages a test stream is sent in: small and large, mixed.
std::vector<size_t> MixedSizes() {
  const size_t cycle[] = {1, 7, 100, 4 * kKiB, 64 * kKiB + 1, kMiB, 3 * kMiB,
                          0, 333};
  std::vector<size_t> sizes;
  for (int round = 0; round < 5; ++round) {
    for (size_t size : cycle) sizes.push_back(size);
  }
  return sizes;
}

// What a client of a stream received.
template <typename Record>
struct Received {
  std::vector<Record> records;
  int summaries = 0;
  bool summary_last = true;  // nothing came after the summary
  uint64_t total_bytes = 0;
  uint64_t total_chunks = 0;
  uint64_t unique_bytes = 0;
};

// Reads a stream to its end (bounded by the call's deadline).
template <typename Stream, typename Response, typename Record>
void ReadAll(Stream* stream, Received<Record>* out) {
  Response response;
  while (stream->Read(&response)) {
    if (out->summaries > 0) out->summary_last = false;
    if (response.has_summary()) {
      ++out->summaries;
      out->total_bytes = response.summary().total_bytes();
      out->total_chunks = response.summary().total_chunks();
      if constexpr (std::is_same_v<Response, v1::DedupResponse>) {
        out->unique_bytes = response.summary().unique_bytes();
      }
    }
    for (const Record& r : response.batch().chunks()) out->records.push_back(r);
  }
}

// Every record follows the one before it and is the digest of its bytes.
template <typename Record>
void ExpectInInputOrder(const std::vector<Record>& records,
                        const std::string& data, fingerprint::Kind kind) {
  uint64_t offset = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    ASSERT_EQ(records[i].offset(), offset) << "record " << i;
    ASSERT_GT(records[i].length(), 0u) << "record " << i;
    ASSERT_LE(offset + records[i].length(), data.size()) << "record " << i;
    ASSERT_EQ(records[i].fingerprint(),
              fingerprint::Digest(kind, absl::string_view(data).substr(
                                            offset, records[i].length())))
        << "record " << i;
    offset += records[i].length();
  }
  EXPECT_EQ(offset, data.size());
}

// Sends `data` on `stream` in messages of `sizes` (taken in turn; the first
// message also carries `request`'s params) while a thread reads every
// response into *received; half-closes and returns the call's status.
template <typename Response, typename Stream, typename Request,
          typename Record>
grpc::Status SendInPieces(Stream* stream, Request request,
                          const std::string& data,
                          const std::vector<size_t>& sizes,
                          Received<Record>* received) {
  std::thread reader([&] { ReadAll<Stream, Response>(stream, received); });
  size_t offset = 0;
  for (size_t i = 0; offset < data.size(); ++i) {
    const size_t size = std::min(data.size() - offset, sizes[i % sizes.size()]);
    request.set_data(data.substr(offset, size));
    offset += size;
    if (!stream->Write(request)) break;
    request.clear_params();
  }
  stream->WritesDone();
  reader.join();
  return stream->Finish();
}

TEST(StreamReactorTest, ChunkRecordsComeInInputOrder) {
  TestServer server;
  ASSERT_TRUE(server.started());
  const std::vector<size_t> sizes = MixedSizes();
  size_t total = 0;
  for (size_t size : sizes) total += size;
  const std::string data = RandomBytes(total, 1);

  auto context = TestServer::Context();
  std::unique_ptr<ChunkStream> stream = server.stub().Chunk(context.get());
  Received<v1::ChunkRecord> received;
  const grpc::Status status = SendInPieces<v1::ChunkResponse>(
      stream.get(),
      ChunkParams(v1::ALGORITHM_FASTCDC, v1::FINGERPRINT_ALGORITHM_XXH128,
                  4096),
      data, sizes, &received);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(received.summaries, 1);
  EXPECT_TRUE(received.summary_last);
  EXPECT_EQ(received.total_bytes, data.size());
  EXPECT_EQ(received.total_chunks, received.records.size());
  // Many responses: the order is that of the input across all of them.
  EXPECT_GT(received.records.size(), 3 * kMaxRecordsPerResponse);
  ExpectInInputOrder(received.records, data, fingerprint::Kind::kXxh128);
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
}

// The index answers in stream order: a chunk is new exactly where it first
// appears, however the bytes were split into messages.
TEST(StreamReactorTest, DedupRecordsComeInInputOrder) {
  TestServer server;
  ASSERT_TRUE(server.started());
  std::vector<std::string> blocks;
  for (uint32_t seed = 10; seed < 13; ++seed) {
    blocks.push_back(RandomBytes(512 * kKiB, seed));
  }
  std::string data;
  for (int i : {0, 1, 0, 2, 1, 0, 2, 2}) data += blocks[i];

  auto context = TestServer::Context();
  std::unique_ptr<DedupStream> stream = server.stub().Dedup(context.get());
  v1::DedupRequest request;
  request.mutable_params()->mutable_chunking()->set_algorithm(
      v1::ALGORITHM_FIXED);
  request.mutable_params()->mutable_chunking()->set_avg_size(4096);
  request.mutable_params()->set_namespace_("order");
  Received<v1::DedupRecord> received;
  const grpc::Status status = SendInPieces<v1::DedupResponse>(
      stream.get(), request, data, MixedSizes(), &received);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ExpectInInputOrder(received.records, data, fingerprint::Kind::kSha256);
  absl::flat_hash_set<std::string> seen;
  uint64_t new_bytes = 0;
  for (size_t i = 0; i < received.records.size(); ++i) {
    const v1::DedupRecord& r = received.records[i];
    EXPECT_EQ(r.is_new(), seen.insert(r.fingerprint()).second) << "record " << i;
    if (r.is_new()) new_bytes += r.length();
  }
  EXPECT_EQ(new_bytes, 3 * 512 * kKiB);
  EXPECT_EQ(received.unique_bytes, new_bytes);
  EXPECT_EQ(received.total_bytes, data.size());
}

// A stream on a server with small messages and a small inflight limit,
// cutting 64-byte chunks with sha256: its responses outweigh its input, so
// a client that does not read soon fills every buffer on the way.
class BackpressureTest : public ::testing::Test {
 protected:
  static constexpr size_t kMessage = 64 * kKiB;
  static constexpr size_t kInflight = 256 * kKiB;
  // Far more than the transport buffers between client and server hold.
  static constexpr int kMessages = 1024;

  BackpressureTest()
      : server_([](ServiceOptions* options) {
          options->max_message_bytes = kMessage;
          options->max_inflight_bytes = kInflight;
        }) {}

  // Opens the stream and starts a writer that sends kMessages messages and
  // half-closes (it stops early when the call ends).
  void Start() {
    ASSERT_TRUE(server_.started());
    stream_ = server_.stub().Chunk(context_.get());
    writer_ = std::thread([this] {
      v1::ChunkRequest request =
          ChunkParams(v1::ALGORITHM_FIXED, v1::FINGERPRINT_ALGORITHM_SHA256, 64);
      for (int i = 0; i < kMessages; ++i) {
        request.set_data(RandomBytes(kMessage, static_cast<uint32_t>(i)));
        if (!stream_->Write(request)) return;
        request.clear_params();
        written_ = i + 1;
      }
      stream_->WritesDone();
    });
  }

  ~BackpressureTest() override {
    if (writer_.joinable()) {
      context_->TryCancel();
      writer_.join();
    }
  }

  // The state of the only stream the server runs (false when there is
  // none).
  bool StreamState(StreamReactor<ChunkRpc>::State* state) {
    bool found = false;
    server_.service().registry().ForEach([&](ActiveStream* stream) {
      if (auto* r = dynamic_cast<StreamReactor<ChunkRpc>*>(stream)) {
        *state = r->state();
        found = true;
      }
    });
    return found;
  }

  // Waits until the server stopped reading a stream whose client still
  // sends, for the responses it does not take: no read outstanding, no
  // task, input still open, kMaxQueuedResponses responses waiting, and no
  // request read and no response taken since the poll before (a stream
  // that still reads passes through such a state only between two reads).
  bool Paused(StreamReactor<ChunkRpc>::State* state) {
    StreamReactor<ChunkRpc>::State before;
    bool paused_before = false;
    return WaitFor([&] {
      const bool paused =
          StreamState(state) && state->input_open && !state->reading &&
          !state->task && state->queued_responses >= kMaxQueuedResponses;
      const bool again = paused && paused_before &&
                         state->requests_read == before.requests_read &&
                         state->queued_responses == before.queued_responses;
      paused_before = paused;
      before = *state;
      return again;
    });
  }

  TestServer server_;
  std::unique_ptr<grpc::ClientContext> context_ = TestServer::Context();
  std::unique_ptr<ChunkStream> stream_;
  std::thread writer_;
  std::atomic<int> written_{0};
};

TEST_F(BackpressureTest, AClientThatDoesNotReadStopsTheServerReading) {
  Start();
  StreamReactor<ChunkRpc>::State state;
  ASSERT_TRUE(Paused(&state));
  // Its responses, its input and its share of the memory budget stay
  // bounded, and the client could not send all it has. Reading stopped at
  // kMaxQueuedResponses; the input already in (at most kInflight + kMessage
  // bytes, 1024 records per 64 KiB) adds at most a response per 64 KiB.
  EXPECT_LE(state.queued_responses,
            kMaxQueuedResponses + (kInflight + kMessage) / kMessage);
  EXPECT_LE(state.inbox_bytes, kInflight + kMessage);
  EXPECT_LE(server_.budget().used(), kInflight + kMessage);
  EXPECT_LT(written_.load(), kMessages);
  // Once the client reads, the stream runs to its end with every byte.
  Received<v1::ChunkRecord> received;
  ReadAll<ChunkStream, v1::ChunkResponse>(stream_.get(), &received);
  writer_.join();
  const grpc::Status status = stream_->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(received.total_bytes, kMessages * kMessage);
  EXPECT_EQ(received.records.size(), kMessages * kMessage / 64);
  EXPECT_EQ(received.summaries, 1);
  EXPECT_TRUE(WaitFor([&] { return server_.budget().used() == 0; }));
}

TEST_F(BackpressureTest, CancellingAPausedStreamFreesIt) {
  Start();
  StreamReactor<ChunkRpc>::State state;
  ASSERT_TRUE(Paused(&state));
  EXPECT_EQ(server_.service().active_streams(), 1u);
  context_->TryCancel();
  writer_.join();
  EXPECT_EQ(stream_->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The slot, the gauge and the memory budget all come back.
  EXPECT_TRUE(WaitFor([&] { return server_.service().active_streams() == 0; }));
  EXPECT_TRUE(WaitFor(
      [&] { return server_.metrics().active_streams().Value() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server_.budget().used() == 0; }));
}

TEST(StreamReactorTest, CancellingMidStreamFreesIt) {
  TestServer server;
  ASSERT_TRUE(server.started());
  auto context = TestServer::Context();
  std::unique_ptr<ChunkStream> stream = server.stub().Chunk(context.get());
  v1::ChunkRequest request =
      ChunkParams(v1::ALGORITHM_FASTCDC, v1::FINGERPRINT_ALGORITHM_SHA256);
  request.set_data(RandomBytes(100000, 3));
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(WaitFor([&] {
    return server.service().active_streams() == 1 &&
           server.metrics().active_streams().Value() == 1;
  }));
  context->TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
  EXPECT_TRUE(
      WaitFor([&] { return server.metrics().active_streams().Value() == 0; }));
  EXPECT_TRUE(WaitFor([&] { return server.budget().used() == 0; }));
  EXPECT_EQ(server.service().streams_started(), 1u);
}

// Sends `requests` as raw messages on a Chunk stream, half-closes, reads
// to the end; the status.
grpc::Status RunChunk(TestServer* server,
                      const std::vector<v1::ChunkRequest>& requests) {
  auto context = TestServer::Context();
  std::unique_ptr<ChunkStream> stream = server->stub().Chunk(context.get());
  for (const v1::ChunkRequest& request : requests) {
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  Received<v1::ChunkRecord> received;
  ReadAll<ChunkStream, v1::ChunkResponse>(stream.get(), &received);
  return stream->Finish();
}

v1::ChunkRequest DataRequest(size_t size) {
  v1::ChunkRequest request;
  request.set_data(RandomBytes(size, 7));
  return request;
}

class GarbageTest : public ::testing::Test {
 protected:
  GarbageTest()
      : server_([](ServiceOptions* o) { o->max_message_bytes = 64 * kKiB; }) {}

  v1::ChunkRequest Params() {
    return ChunkParams(v1::ALGORITHM_FASTCDC, v1::FINGERPRINT_ALGORITHM_XXH128);
  }

  TestServer server_;
};

TEST_F(GarbageTest, ParamsInALaterMessage) {
  ExpectRefused(RunChunk(&server_, {Params(), DataRequest(1000), Params()}),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"params may be sent only in the first request"});
}

TEST_F(GarbageTest, AFirstMessageWithNeitherParamsNorData) {
  ExpectRefused(RunChunk(&server_, {v1::ChunkRequest(), Params()}),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"the first request of a stream must carry params"});
}

TEST_F(GarbageTest, AStreamThatEndsBeforeItsParams) {
  ExpectRefused(RunChunk(&server_, {}), grpc::StatusCode::INVALID_ARGUMENT,
                {"ended before a request with params"});
}

// Later, an empty message is no error: it adds nothing.
TEST_F(GarbageTest, AnEmptyMessageMidStreamAddsNothing) {
  auto context = TestServer::Context();
  std::unique_ptr<ChunkStream> stream = server_.stub().Chunk(context.get());
  v1::ChunkRequest first = Params();
  first.set_data("abc");
  ASSERT_TRUE(stream->Write(first));
  ASSERT_TRUE(stream->Write(v1::ChunkRequest()));
  ASSERT_TRUE(stream->Write(DataRequest(5000)));
  stream->WritesDone();
  Received<v1::ChunkRecord> received;
  ReadAll<ChunkStream, v1::ChunkResponse>(stream.get(), &received);
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(received.total_bytes, 5003u);
}

TEST_F(GarbageTest, AnOversizeMessage) {
  ExpectRefused(
      RunChunk(&server_, {Params(), DataRequest(1000), DataRequest(64 * kKiB + 1)}),
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      {"data of 65537 bytes exceeds max_message_bytes (65536)"});
}

// A message that does not parse (params whose bytes are no ChunkParams)
// is refused by its position, not taken for the end of the stream.
TEST_F(GarbageTest, AMessageThatDoesNotParse) {
  v1::ChunkRequest garbage;
  garbage.GetReflection()
      ->MutableUnknownFields(&garbage)
      ->AddLengthDelimited(1, std::string("\xff\xff\xff", 3));
  ExpectRefused(RunChunk(&server_, {Params(), DataRequest(10), garbage}),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"request message 3 of the stream",
                 "is not a valid chunkd.v1.ChunkRequest", "the stream is ended"});
}

TEST_F(GarbageTest, BadParams) {
  v1::ChunkRequest params = Params();
  params.mutable_params()->mutable_chunking()->set_avg_size(3);
  const grpc::Status status = RunChunk(&server_, {params});
  ExpectRefused(status, grpc::StatusCode::INVALID_ARGUMENT, {"avg_size"});
}

// A Dedup stream that fails midway tells its client what stays committed.
TEST_F(GarbageTest, ADedupStreamThatFailsMidwaySaysWhatStays) {
  auto context = TestServer::Context();
  std::unique_ptr<DedupStream> stream = server_.stub().Dedup(context.get());
  v1::DedupRequest first;
  first.mutable_params()->set_namespace_("ns");
  first.set_data(RandomBytes(5000, 9));
  ASSERT_TRUE(stream->Write(first));
  v1::DedupRequest garbage;
  garbage.GetReflection()
      ->MutableUnknownFields(&garbage)
      ->AddLengthDelimited(1, std::string("\xff\xff\xff", 3));
  stream->Write(garbage);
  stream->WritesDone();
  Received<v1::DedupRecord> received;
  ReadAll<DedupStream, v1::DedupResponse>(stream.get(), &received);
  ExpectRefused(stream->Finish(), grpc::StatusCode::INVALID_ARGUMENT,
                {"request message 2 of the stream",
                 "retry the whole stream with the same stream_id"});
  EXPECT_TRUE(WaitFor([&] { return server_.service().active_streams() == 0; }));
}

}  // namespace
}  // namespace chunkd::service
