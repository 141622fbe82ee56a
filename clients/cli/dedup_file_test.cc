#include "clients/cli/dedup_file.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "clients/cli/fake_service.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

const std::string kJpeg =
    std::string(CHUNKD_TEST_DATA_DIR) + "/SekienAkashita.jpg";

using ::chunkd::cli::testing::ReadAll;

struct DedupRun {
  absl::StatusOr<DedupTotals> totals;
  std::string err;
};

DedupRun Dedup(testing::FakeServer& server, DedupFileOptions options,
               const std::string& name = kJpeg) {
  options.params.set_namespace_("ns");
  options.replay.initial_backoff = std::chrono::milliseconds(1);
  options.replay.max_backoff = std::chrono::milliseconds(4);
  ConnectOptions connect;
  connect.address = server.address();
  auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(connect));
  std::FILE* err = std::tmpfile();
  DedupRun run{DedupFile(
                   stub.get(), options, name,
                   [](InputFile* input) {
                     return std::make_unique<Progress>(nullptr, input->name(),
                                                       input->size());
                   },
                   err),
               ""};
  run.err = ReadAll(err);
  std::fclose(err);
  return run;
}

TEST(RandomStreamIdTest, ValidAndFresh) {
  const std::string a = RandomStreamId();
  const std::string b = RandomStreamId();
  // What DedupParams.stream_id takes: 1..64 characters of [A-Za-z0-9._-].
  EXPECT_THAT(a, MatchesRegex("chunkctl-[0-9a-f]{32}"));
  EXPECT_NE(a, b);
}

TEST(DedupFileTest, WithoutRetriesOneStreamAndNoStreamId) {
  testing::FakeServer server;
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
  server.service().dedup_failures = 1;
  DedupRun run = Dedup(server, DedupFileOptions());
  ASSERT_FALSE(run.totals.ok());
  EXPECT_EQ(run.totals.status().message(), "UNAVAILABLE: restarting");
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(server.service().dedup_stream_ids(), std::vector<std::string>{""});
}

TEST(DedupFileTest, ReplaysTheFileWithTheSameStreamId) {
  testing::FakeServer server;
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
  server.service().dedup_failures = 2;
  DedupFileOptions options;
  options.replay.retries = 2;
  DedupRun run = Dedup(server, options);
  ASSERT_TRUE(run.totals.ok()) << run.totals.status();
  EXPECT_EQ(run.totals->bytes, 109466u);
  const std::vector<std::string> ids = server.service().dedup_stream_ids();
  ASSERT_THAT(ids, SizeIs(3));
  EXPECT_THAT(ids, Each(ids[0]));
  EXPECT_THAT(ids[0], MatchesRegex("chunkctl-[0-9a-f]{32}"));
  const std::vector<std::string> lines =
      absl::StrSplit(run.err, '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(2)) << run.err;
  EXPECT_THAT(lines[0],
              MatchesRegex("chunkctl: .*SekienAkashita.jpg: UNAVAILABLE: "
                           "restarting; sending it again in 0.00 s \\(retry "
                           "1 of 2\\)"));
  EXPECT_THAT(lines[1], HasSubstr("(retry 2 of 2)"));

  // Another run of the same file is another logical stream: a new id.
  DedupRun again = Dedup(server, options);
  ASSERT_TRUE(again.totals.ok()) << again.totals.status();
  EXPECT_THAT(server.service().dedup_stream_ids(), SizeIs(4));
  EXPECT_NE(server.service().dedup_stream_ids()[3], ids[0]);
}

TEST(DedupFileTest, GivesUpAfterTheLastRetry) {
  testing::FakeServer server;
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "index full");
  server.service().dedup_failures = 5;
  DedupFileOptions options;
  options.replay.retries = 3;
  DedupRun run = Dedup(server, options);
  ASSERT_FALSE(run.totals.ok());
  EXPECT_EQ(run.totals.status().message(), "RESOURCE_EXHAUSTED: index full");
  EXPECT_THAT(server.service().dedup_stream_ids(), SizeIs(4));
  EXPECT_THAT(run.err, HasSubstr("(retry 3 of 3)"));
  EXPECT_FALSE(absl::StrContains(run.err, "retry 4"));
}

TEST(DedupFileTest, NeverRetriesAFinalError) {
  testing::FakeServer server;
  server.service().fail_status = grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED, "the token does not grant ns");
  server.service().dedup_failures = 1;
  DedupFileOptions options;
  options.replay.retries = 3;
  DedupRun run = Dedup(server, options);
  ASSERT_FALSE(run.totals.ok());
  EXPECT_EQ(run.totals.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(server.service().dedup_stream_ids(), SizeIs(1));
  EXPECT_EQ(run.err, "");
  // Nor an error chunkctl finds in the answers itself (a record missing:
  // INTERNAL, "protocol error"), which a replay would meet again.
  testing::FakeServer broken;
  broken.service().fault = testing::Fault::kSkipRecord;
  DedupRun protocol = Dedup(broken, options);
  ASSERT_FALSE(protocol.totals.ok());
  EXPECT_EQ(protocol.totals.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(protocol.totals.status().message()),
              HasSubstr("protocol error"));
  EXPECT_THAT(broken.service().dedup_stream_ids(), SizeIs(1));
  EXPECT_EQ(protocol.err, "");
  // Nor a file that cannot be opened.
  DedupRun missing = Dedup(server, options, "/nonexistent/file");
  EXPECT_EQ(missing.totals.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.err, "");
}

}  // namespace
}  // namespace chunkd::cli
