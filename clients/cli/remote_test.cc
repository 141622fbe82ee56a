#include "clients/cli/remote.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "clients/cli/fake_service.h"
#include "clients/cli/local_chunk.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::chunkd::cli::testing::FakeServer;
using ::chunkd::cli::testing::Fault;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kJpeg =
    std::string(CHUNKD_TEST_DATA_DIR) + "/SekienAkashita.jpg";

using ::chunkd::cli::testing::ReadAll;

ConnectOptions Plaintext(const std::string& address) {
  ConnectOptions options;
  options.address = address;
  return options;
}

class RemoteTest : public ::testing::Test {
 protected:
  RemoteTest()
      : stub_(chunkd::v1::ChunkService::NewStub(
            MakeChannel(Plaintext(server_.address())))) {}

  // ChunkRemotely on `path`; *printed receives the output.
  absl::Status Chunk(const chunkd::v1::ChunkParams& params,
                     fingerprint::Kind kind, size_t message_size,
                     const std::string& path, std::string* printed,
                     OutputFormat format = OutputFormat::kText) {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(path);
    if (!input.ok()) return input.status();
    std::FILE* out = std::tmpfile();
    RecordWriter writer(out, format, kind != fingerprint::Kind::kNone);
    absl::Status status = ChunkRemotely(stub_.get(), params, kind, message_size,
                                        input->get(), &writer);
    *printed = ReadAll(out);
    std::fclose(out);
    return status;
  }

  absl::StatusOr<DedupTotals> Dedup(const std::string& ns,
                                    const std::string& path) {
    absl::StatusOr<std::unique_ptr<InputFile>> input = InputFile::Open(path);
    if (!input.ok()) return input.status();
    chunkd::v1::DedupParams params;
    params.set_namespace_(ns);
    return DedupRemotely(stub_.get(), params, fingerprint::Kind::kSha256, 4096,
                         input->get());
  }

  FakeServer server_;
  std::unique_ptr<chunkd::v1::ChunkService::Stub> stub_;
};

TEST_F(RemoteTest, PrintsWhatLocalPrints) {
  chunkd::v1::ChunkParams params;
  params.mutable_chunking()->set_min_size(4096);
  params.mutable_chunking()->set_avg_size(16384);
  params.mutable_chunking()->set_max_size(65535);
  params.mutable_chunking()->set_normalization_level(2);
  params.mutable_chunking()->set_seed(666);
  chunking::ChunkerOptions options =
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  options.min_size = 4096;
  options.avg_size = 16384;
  options.max_size = 65535;
  options.normalization_level = 2;
  options.seed = 666;
  for (fingerprint::Kind kind :
       {fingerprint::Kind::kSha256, fingerprint::Kind::kXxh128,
        fingerprint::Kind::kNone}) {
    params.set_fingerprint(kind == fingerprint::Kind::kSha256
                               ? chunkd::v1::FINGERPRINT_ALGORITHM_SHA256
                           : kind == fingerprint::Kind::kXxh128
                               ? chunkd::v1::FINGERPRINT_ALGORITHM_XXH128
                               : chunkd::v1::FINGERPRINT_ALGORITHM_NONE);
    for (OutputFormat format : {OutputFormat::kText, OutputFormat::kJson}) {
      std::FILE* out = std::tmpfile();
      {
        RecordWriter writer(out, format, kind != fingerprint::Kind::kNone);
        absl::StatusOr<std::unique_ptr<InputFile>> input =
            InputFile::Open(kJpeg);
        ASSERT_TRUE(input.ok());
        ASSERT_TRUE(
            ChunkLocally(options, kind, 1 << 20, input->get(), &writer).ok());
      }
      const std::string local = ReadAll(out);
      std::fclose(out);
      ASSERT_FALSE(local.empty());
      for (size_t message_size : {size_t{1000}, size_t{1} << 20}) {
        std::string remote;
        absl::Status status =
            Chunk(params, kind, message_size, kJpeg, &remote, format);
        ASSERT_TRUE(status.ok()) << status;
        EXPECT_EQ(remote, local) << "message size " << message_size;
      }
    }
  }
}

TEST_F(RemoteTest, EmptyInput) {
  std::string printed;
  absl::Status status =
      Chunk(chunkd::v1::ChunkParams(), fingerprint::Kind::kSha256, 1 << 20,
            "/dev/null", &printed);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(printed, "");
}

TEST_F(RemoteTest, ServerErrorKeepsCodeAndNamesIt) {
  server_.service().fault = Fault::kReject;
  std::string printed;
  absl::Status status =
      Chunk(chunkd::v1::ChunkParams(), fingerprint::Kind::kSha256, 4096, kJpeg,
            &printed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "INVALID_ARGUMENT: min_size 1 is outside 64..1048576");
}

// A server's error, and how chunkctl reports it: the same code, and the
// message "<CODE_NAME>: <the server's message>".
struct ServerError {
  grpc::StatusCode code;
  std::string message;
  std::string reported;
};

std::vector<ServerError> ServerErrors() {
  return {
      {grpc::StatusCode::RESOURCE_EXHAUSTED,
       "chunkd is serving its limit of 1 streams (--max_streams)",
       "RESOURCE_EXHAUSTED: chunkd is serving its limit of 1 streams "
       "(--max_streams)"},
      {grpc::StatusCode::UNAVAILABLE, "chunkd is shutting down",
       "UNAVAILABLE: chunkd is shutting down"},
      {grpc::StatusCode::DATA_LOSS, "the index lost an entry",
       "DATA_LOSS: the index lost an entry"},
      {grpc::StatusCode::INVALID_ARGUMENT,
       "chunking.avg_size is not a parameter of seqcdc",
       "INVALID_ARGUMENT: chunking.avg_size is not a parameter of seqcdc"},
  };
}

TEST_F(RemoteTest, ServerErrorsKeepTheirCodeAndMessage) {
  for (Fault fault : {Fault::kFail, Fault::kFailMidStream}) {
    for (const ServerError& error : ServerErrors()) {
      server_.service().fault = fault;
      server_.service().fail_status = grpc::Status(error.code, error.message);
      std::string printed;
      absl::Status chunk =
          Chunk(chunkd::v1::ChunkParams(), fingerprint::Kind::kSha256, 4096,
                kJpeg, &printed);
      EXPECT_EQ(static_cast<int>(chunk.code()), static_cast<int>(error.code))
          << chunk;
      EXPECT_EQ(chunk.message(), error.reported);
      // Before any record, or after some were printed.
      EXPECT_EQ(printed.empty(), fault == Fault::kFail) << printed;
      absl::StatusOr<DedupTotals> dedup = Dedup("ns", kJpeg);
      EXPECT_EQ(static_cast<int>(dedup.status().code()),
                static_cast<int>(error.code))
          << dedup.status();
      EXPECT_EQ(dedup.status().message(), error.reported);
    }
  }
}

TEST_F(RemoteTest, UnreachableServerIsUnavailable) {
  auto stub =
      chunkd::v1::ChunkService::NewStub(MakeChannel(Plaintext("127.0.0.1:1")));
  absl::StatusOr<chunkd::v1::GetServerInfoResponse> info =
      GetServerInfo(stub.get());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(info.status().message()),
              StartsWith("UNAVAILABLE: "));
}

TEST_F(RemoteTest, TokenIsSentAsBearerMetadataOnEveryCall) {
  ASSERT_TRUE(GetServerInfo(stub_.get()).ok());
  EXPECT_EQ(server_.service().last_authorization, "");

  ConnectOptions options = Plaintext(server_.address());
  options.token = "s3cret-token-0123456789";
  auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(options));
  for (int i = 0; i < 2; ++i) {
    server_.service().last_authorization.clear();
    ASSERT_TRUE(GetServerInfo(stub.get()).ok());
    EXPECT_EQ(server_.service().last_authorization,
              "Bearer s3cret-token-0123456789");
  }
}

TEST_F(RemoteTest, TlsToAPlaintextServerFailsAsUnavailable) {
  ConnectOptions options = Plaintext(server_.address());
  options.tls = true;
  auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(options));
  absl::StatusOr<chunkd::v1::GetServerInfoResponse> info =
      GetServerInfo(stub.get());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RemoteTest, DetectsProtocolViolations) {
  struct Case {
    Fault fault;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {Fault::kSkipRecord, "expected offset"},
           {Fault::kWrongSummary, "the summary says"},
           {Fault::kShortFingerprint, "31-byte fingerprint, expected 32"},
       }) {
    server_.service().fault = c.fault;
    std::string printed;
    absl::Status status =
        Chunk(chunkd::v1::ChunkParams(), fingerprint::Kind::kSha256, 4096,
              kJpeg, &printed);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal)
        << static_cast<int>(c.fault) << ": " << status;
    EXPECT_THAT(std::string(status.message()), StartsWith("protocol error: "));
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

// A stream that ends OK but whose summary does not account for every byte
// sent, or that has no summary, must not pass for success: DATA_LOSS, named
// like a server's error.
TEST_F(RemoteTest, SummaryThatDoesNotCountTheBytesSentIsDataLoss) {
  struct Case {
    Fault fault;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {Fault::kWrongTotal,
            "DATA_LOSS: server summary reports total_bytes=109465 but 109466 "
            "bytes were sent"},
           {Fault::kNoSummary,
            "DATA_LOSS: the stream ended without a summary; 109466 bytes "
            "were sent"},
       }) {
    server_.service().fault = c.fault;
    std::string printed;
    absl::Status chunk = Chunk(chunkd::v1::ChunkParams(),
                               fingerprint::Kind::kSha256, 4096, kJpeg,
                               &printed);
    EXPECT_EQ(chunk.code(), absl::StatusCode::kDataLoss) << chunk;
    EXPECT_EQ(chunk.message(), c.message);
    absl::StatusOr<DedupTotals> dedup = Dedup("ns", kJpeg);
    EXPECT_EQ(dedup.status().code(), absl::StatusCode::kDataLoss)
        << dedup.status();
    EXPECT_EQ(dedup.status().message(), c.message);
  }
  // Without a fault the same streams succeed.
  server_.service().fault = Fault::kNone;
  std::string printed;
  EXPECT_TRUE(Chunk(chunkd::v1::ChunkParams(), fingerprint::Kind::kSha256,
                    4096, kJpeg, &printed)
                  .ok());
  EXPECT_TRUE(Dedup("ns", kJpeg).ok());
}

TEST_F(RemoteTest, OkBeforeAllDataWasSentIsDataLoss) {
  // Far more than flow control lets the client send before the server reads
  // it, so the server's OK after the first data message stops the upload.
  const std::string path = ::testing::TempDir() + "/chunkctl-early-ok";
  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    const std::string block(1 << 20, 'x');
    for (int i = 0; i < 32; ++i) {
      ASSERT_EQ(std::fwrite(block.data(), 1, block.size(), file), block.size());
    }
    ASSERT_EQ(std::fclose(file), 0);
  }
  server_.service().fault = Fault::kEarlyOk;
  std::string printed;
  absl::Status chunk = Chunk(chunkd::v1::ChunkParams(),
                             fingerprint::Kind::kSha256, 4096, path, &printed);
  EXPECT_EQ(chunk.code(), absl::StatusCode::kDataLoss) << chunk;
  EXPECT_THAT(std::string(chunk.message()),
              StartsWith("DATA_LOSS: the server ended the stream with OK "
                         "before receiving all data; "));
  absl::StatusOr<DedupTotals> dedup = Dedup("ns", path);
  EXPECT_EQ(dedup.status().code(), absl::StatusCode::kDataLoss)
      << dedup.status();
  EXPECT_THAT(std::string(dedup.status().message()),
              StartsWith("DATA_LOSS: the server ended the stream with OK "
                         "before receiving all data; "));
  std::remove(path.c_str());
}

TEST_F(RemoteTest, DedupTotals) {
  absl::StatusOr<DedupTotals> first = Dedup("ns", kJpeg);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->bytes, 109466u);
  EXPECT_EQ(first->unique_bytes, 109466u);
  EXPECT_GT(first->chunks, 1u);
  EXPECT_EQ(first->unique_chunks, first->chunks);
  absl::StatusOr<DedupTotals> second = Dedup("ns", kJpeg);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->bytes, 109466u);
  EXPECT_EQ(second->unique_bytes, 0u);
  EXPECT_EQ(second->chunks, first->chunks);
  EXPECT_EQ(second->unique_chunks, 0u);
}

TEST_F(RemoteTest, DedupChecksUniqueTotals) {
  server_.service().fault = Fault::kWrongSummary;
  absl::StatusOr<DedupTotals> totals = Dedup("ns", kJpeg);
  EXPECT_EQ(totals.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(totals.status().message()),
              HasSubstr("unique bytes"));
}

TEST(FormatServerInfoTest, Readable) {
  chunkd::v1::GetServerInfoResponse info;
  info.set_version("0.1.0");
  info.set_chunking_backend("auto");
  info.set_index_backend("memory");
  info.set_max_message_bytes(4194304);
  info.set_max_inflight_bytes(67108864);
  info.add_fingerprints(chunkd::v1::FINGERPRINT_ALGORITHM_SHA256);
  info.add_fingerprints(chunkd::v1::FINGERPRINT_ALGORITHM_XXH128);
  info.add_fingerprints(chunkd::v1::FINGERPRINT_ALGORITHM_NONE);
  auto* fastcdc = info.add_algorithms();
  fastcdc->set_algorithm(chunkd::v1::ALGORITHM_FASTCDC);
  fastcdc->set_name("fastcdc");
  fastcdc->set_backend("avx2");
  fastcdc->set_backend_threads(2);
  fastcdc->mutable_min_size()->set_min(64);
  fastcdc->mutable_min_size()->set_max(1048576);
  fastcdc->mutable_min_size()->set_default_value(4096);
  fastcdc->mutable_normalization_level()->set_max(3);
  fastcdc->mutable_normalization_level()->set_default_value(1);
  fastcdc->mutable_avg_size()->set_min(256);
  fastcdc->mutable_avg_size()->set_max(4194304);
  fastcdc->mutable_avg_size()->set_default_value(16384);
  fastcdc->mutable_max_size()->set_min(1024);
  fastcdc->mutable_max_size()->set_max(16777216);
  fastcdc->mutable_max_size()->set_default_value(65536);
  auto* crc32 = info.add_algorithms();
  crc32->set_algorithm(chunkd::v1::ALGORITHM_CRC32);
  crc32->set_name("crc32");
  crc32->set_backend("avx512");
  crc32->set_backend_threads(1);
  crc32->mutable_min_size()->set_max(1);
  crc32->mutable_avg_size()->set_max(2);
  crc32->mutable_max_size()->set_max(3);
  crc32->set_avg_size_power_of_two(true);
  // Parameters an algorithm does not take (max 0) are left out, and so is
  // a backend an older server does not report.
  auto* repmax = info.add_algorithms();
  repmax->set_algorithm(chunkd::v1::ALGORITHM_REP_MAX_CDC);
  repmax->set_name("repmaxcdc");
  repmax->mutable_min_size()->set_max(4194304);
  repmax->mutable_horizon_size()->set_max(16777216);
  repmax->mutable_horizon_size()->set_default_value(2097152);
  auto* rabin = info.add_algorithms();
  rabin->set_algorithm(chunkd::v1::ALGORITHM_RABIN);
  rabin->set_name("rabin");
  rabin->mutable_min_size()->set_max(5);
  rabin->mutable_polynomial()->set_min(uint64_t{1} << 53);
  rabin->mutable_polynomial()->set_max((uint64_t{1} << 54) - 1);
  rabin->mutable_polynomial()->set_default_value(0x3DA3358B4DC173);
  EXPECT_EQ(FormatServerInfo(info),
            "version:             0.1.0\n"
            "chunking backend:    auto\n"
            "index backend:       memory\n"
            "max message bytes:   4194304\n"
            "max in-flight bytes: 67108864\n"
            "fingerprints:        sha256, xxh128, none\n"
            "algorithms:\n"
            "  fastcdc\n"
            "    backend              avx2 (2 threads)\n"
            "    min_size             64..1048576 (default 4096)\n"
            "    avg_size             256..4194304 (default 16384)\n"
            "    max_size             1024..16777216 (default 65536)\n"
            "    normalization_level  0..3 (default 1)\n"
            "  crc32\n"
            "    backend              avx512 (1 thread)\n"
            "    min_size             0..1 (default 0)\n"
            "    avg_size             0..2 (default 0), a power of two\n"
            "    max_size             0..3 (default 0)\n"
            "  repmaxcdc\n"
            "    min_size             0..4194304 (default 0)\n"
            "    horizon_size         0..16777216 (default 2097152)\n"
            "  rabin\n"
            "    min_size             0..5 (default 0)\n"
            "    polynomial           0x20000000000000..0x3fffffffffffff "
            "(default 0x3da3358b4dc173), irreducible\n");
}

}  // namespace
}  // namespace chunkd::cli
