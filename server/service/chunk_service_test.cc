// ChunkServiceImpl in process: a real service on a loopback port, a
// generated stub as the client (service_test_server.h). Admission (the
// stream limits, the bearer tokens, the drain) and the unary calls.

#include "service/chunk_service.h"

#include <memory>
#include <string>
#include <vector>

#include "chunkd/chunker.h"
#include "fingerprint/fingerprint.h"
#include "gtest/gtest.h"
#include "service/auth.h"
#include "service/service_test_server.h"
#include "service/unary_calls.h"

namespace chunkd::service {
namespace {

using ChunkStream = grpc::ClientReaderWriter<v1::ChunkRequest, v1::ChunkResponse>;

// A Chunk stream left open after its params (or refused at once).
struct OpenStream {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<ChunkStream> stream;

  OpenStream(TestServer* server, const std::string& token = "")
      : context(TestServer::Context(token)),
        stream(server->stub().Chunk(context.get())) {
    v1::ChunkRequest first;
    first.mutable_params()->mutable_chunking()->set_algorithm(
        v1::ALGORITHM_FASTCDC);
    first.set_data("abc");
    stream->Write(first);
  }

  // Half-closes and reads to the end; the status.
  grpc::Status Close() {
    stream->WritesDone();
    v1::ChunkResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  }
};

double Rejected(TestServer& server, RejectReason reason) {
  return server.metrics().StreamsRejected(RejectReasonLabel(reason)).Value();
}

TEST(ChunkServiceTest, MaxStreams) {
  TestServer server([](ServiceOptions* o) { o->limits.max_streams = 2; });
  ASSERT_TRUE(server.started());
  OpenStream a(&server), b(&server);
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 2; }));
  OpenStream refused(&server);
  ExpectRefused(refused.Close(), grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"--max_streams"});
  EXPECT_EQ(Rejected(server, RejectReason::kLimit), 1);
  EXPECT_EQ(server.service().active_streams(), 2u);
  // A slot comes back when a stream ends, and is taken again.
  EXPECT_TRUE(a.Close().ok());
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 1; }));
  OpenStream c(&server);
  EXPECT_TRUE(c.Close().ok());
  EXPECT_TRUE(b.Close().ok());
  EXPECT_EQ(server.service().streams_started(), 3u);
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
  EXPECT_TRUE(server.service().WaitForCalls(absl::Now() + kTestWait));
}

TEST(ChunkServiceTest, PerTokenLimitAndTokens) {
  auto tokens = TokenTable::Parse("token-aaaaaaaaaaaa ns-a\ntoken-bbbbbbbbbbbb *\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  TestServer server([&](ServiceOptions* o) {
    o->auth = &*tokens;
    o->limits.max_streams_per_token = 1;
  });
  ASSERT_TRUE(server.started());
  OpenStream a(&server, "token-aaaaaaaaaaaa");
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 1; }));
  OpenStream again(&server, "token-aaaaaaaaaaaa");
  ExpectRefused(again.Close(), grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"--max_streams_per_token"});
  EXPECT_EQ(Rejected(server, RejectReason::kPerTokenLimit), 1);
  // Another token has its own share.
  OpenStream b(&server, "token-bbbbbbbbbbbb");
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 2; }));
  // No known token: refused before it takes a slot.
  OpenStream unknown(&server, "token-cccccccccccc");
  EXPECT_EQ(unknown.Close().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Rejected(server, RejectReason::kToken), 1);
  EXPECT_TRUE(a.Close().ok());
  EXPECT_TRUE(b.Close().ok());
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
}

TEST(ChunkServiceTest, ANamespaceTheTokenMayNotUse) {
  auto tokens = TokenTable::Parse("token-aaaaaaaaaaaa ns-a\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  TestServer server([&](ServiceOptions* o) { o->auth = &*tokens; });
  ASSERT_TRUE(server.started());
  auto context = TestServer::Context("token-aaaaaaaaaaaa");
  auto stream = server.stub().Dedup(context.get());
  v1::DedupRequest first;
  first.mutable_params()->set_namespace_("ns-b");
  first.set_data("abc");
  stream->Write(first);
  stream->WritesDone();
  v1::DedupResponse response;
  while (stream->Read(&response)) {
  }
  ExpectRefused(stream->Finish(), grpc::StatusCode::PERMISSION_DENIED,
                {"ns-b"});
  EXPECT_EQ(Rejected(server, RejectReason::kAuth), 1);
  EXPECT_TRUE(WaitFor([&] { return server.service().active_streams() == 0; }));
}

TEST(ChunkServiceTest, ADrainingServiceRefusesNewStreams) {
  TestServer server;
  ASSERT_TRUE(server.started());
  OpenStream running(&server);
  ASSERT_TRUE(WaitFor([&] { return server.service().active_streams() == 1; }));
  server.service().BeginShutdown();
  OpenStream late(&server);
  ExpectRefused(late.Close(), grpc::StatusCode::UNAVAILABLE,
                {"shutting down"});
  EXPECT_EQ(Rejected(server, RejectReason::kShutdown), 1);
  // The running stream still ends normally.
  EXPECT_TRUE(running.Close().ok());
  EXPECT_TRUE(server.service().WaitForCalls(absl::Now() + kTestWait));
}

TEST(ChunkServiceTest, GetServerInfo) {
  TestServer server([](ServiceOptions* o) { o->max_message_bytes = 12345; });
  ASSERT_TRUE(server.started());
  auto context = TestServer::Context();
  v1::GetServerInfoResponse info;
  const grpc::Status status =
      server.stub().GetServerInfo(context.get(), {}, &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.version(), "9.8.7");
  EXPECT_EQ(info.index_backend(), "memory");
  EXPECT_EQ(info.max_message_bytes(), 12345u);
  ASSERT_EQ(static_cast<size_t>(info.algorithms_size()),
            chunking::AllAlgorithms().size());
  for (const v1::AlgorithmInfo& algorithm : info.algorithms()) {
    const chunking::Algorithm parsed =
        *chunking::ParseAlgorithm(algorithm.name());
    const chunking::AlgorithmLimits& limits = chunking::LimitsFor(parsed);
    // The range of max_size where the algorithm takes it, else none.
    const uint64_t want_max = chunking::TakesParameter(parsed, "max_size")
                                  ? limits.max_size.max
                                  : 0;
    EXPECT_EQ(algorithm.has_max_size(), want_max != 0) << algorithm.name();
    EXPECT_EQ(algorithm.max_size().max(), want_max) << algorithm.name();
    EXPECT_FALSE(algorithm.backend().empty()) << algorithm.name();
  }
  EXPECT_EQ(info.fingerprints_size(), 3);
}

class UnaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started());
    present_ = fingerprint::Digest(fingerprint::Kind::kSha256, "present");
    absent_ = fingerprint::Digest(fingerprint::Kind::kSha256, "absent");
    // Two references to `present_`.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(server_.index().Insert("ns", {{present_, 7}}).ok());
    }
  }

  grpc::Status FindMissing(const v1::FindMissingRequest& request,
                           v1::FindMissingResponse* response) {
    auto context = TestServer::Context();
    return server_.stub().FindMissing(context.get(), request, response);
  }

  grpc::Status Release(const v1::ReleaseRequest& request,
                       v1::ReleaseResponse* response) {
    auto context = TestServer::Context();
    return server_.stub().Release(context.get(), request, response);
  }

  TestServer server_;
  std::string present_, absent_;
};

TEST_F(UnaryTest, FindMissingNamesWhatTheIndexLacks) {
  v1::FindMissingRequest request;
  request.set_namespace_("ns");
  request.add_fingerprints(present_);
  request.add_fingerprints(absent_);
  v1::FindMissingResponse response;
  const grpc::Status status = FindMissing(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.missing_fingerprints_size(), 1);
  EXPECT_EQ(response.missing_fingerprints(0), absent_);
  // In another namespace both are missing.
  request.set_namespace_("other");
  response.Clear();
  ASSERT_TRUE(FindMissing(request, &response).ok());
  EXPECT_EQ(response.missing_fingerprints_size(), 2);
}

TEST_F(UnaryTest, FindMissingRefusesBadRequests) {
  v1::FindMissingRequest request;
  request.set_namespace_("ns");
  request.add_fingerprints(present_);
  request.add_fingerprints("short");
  v1::FindMissingResponse response;
  ExpectRefused(FindMissing(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"fingerprints[1] has 5 bytes"});
  request.clear_fingerprints();
  for (int i = 0; i <= kMaxFindMissingFingerprints; ++i) {
    request.add_fingerprints(present_);
  }
  ExpectRefused(FindMissing(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"fingerprints has 10001 entries; at most 10000"});
  request.clear_fingerprints();
  request.set_namespace_("no spaces");
  ExpectRefused(FindMissing(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT, {"namespace"});
}

TEST_F(UnaryTest, ReleaseCountsReferencesDown) {
  v1::ReleaseRequest request;
  request.set_namespace_("ns");
  request.set_fingerprint(v1::FINGERPRINT_ALGORITHM_SHA256);
  request.add_fingerprints(present_);
  v1::ReleaseResponse response;
  const grpc::Status status = Release(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.ref_counts_size(), 1);
  EXPECT_EQ(response.ref_counts(0), 1u);
  // The last reference gone, the chunk is missing.
  response.Clear();
  ASSERT_TRUE(Release(request, &response).ok());
  EXPECT_EQ(response.ref_counts(0), 0u);
  v1::FindMissingRequest find;
  find.set_namespace_("ns");
  find.add_fingerprints(present_);
  v1::FindMissingResponse missing;
  ASSERT_TRUE(FindMissing(find, &missing).ok());
  EXPECT_EQ(missing.missing_fingerprints_size(), 1);
}

TEST_F(UnaryTest, ReleaseRefusesBadRequests) {
  v1::ReleaseRequest request;
  request.set_namespace_("ns");
  request.set_fingerprint(v1::FINGERPRINT_ALGORITHM_NONE);
  request.add_fingerprints(present_);
  v1::ReleaseResponse response;
  ExpectRefused(Release(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"fingerprint NONE cannot be used with Release"});
  request.set_fingerprint(v1::FINGERPRINT_ALGORITHM_XXH128);
  ExpectRefused(Release(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"fingerprints[0] has 32 bytes; fingerprints of xxh128 have 16"});
  request.set_fingerprint(v1::FINGERPRINT_ALGORITHM_SHA256);
  request.set_request_id(std::string(1000, 'x'));
  ExpectRefused(Release(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT, {"request_id"});
  // Nothing was released by the refused calls.
  request.clear_request_id();
  ASSERT_TRUE(Release(request, &response).ok());
  EXPECT_EQ(response.ref_counts(0), 1u);
}

// A namespace that is not UTF-8: the bytes are no FindMissingRequest.
TEST_F(UnaryTest, ARequestThatDoesNotParse) {
  v1::FindMissingRequest request;
  request.GetReflection()
      ->MutableUnknownFields(&request)
      ->AddLengthDelimited(1, std::string("\xff\xfe", 2));
  v1::FindMissingResponse response;
  ExpectRefused(FindMissing(request, &response),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"the request is not a valid chunkd.v1.FindMissingRequest"});
}

}  // namespace
}  // namespace chunkd::service
