#include "clients/cli/chunk_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "clients/cli/fake_service.h"
#include "clients/cli/remote.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::chunkd::cli::testing::FakeServer;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;
using ::testing::StartsWith;

const std::string kJpeg =
    std::string(CHUNKD_TEST_DATA_DIR) + "/SekienAkashita.jpg";

using ::chunkd::cli::testing::ReadAll;

struct ChunkRun {
  absl::Status status;
  std::string out;
  std::string err;
};

// ChunkFile on `name` against `server`, with `retries` and short backoffs.
ChunkRun Chunk(FakeServer& server, int retries,
               const std::string& name = kJpeg) {
  ConnectOptions connect;
  connect.address = server.address();
  auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(connect));
  ChunkFileOptions options;
  options.replay.retries = retries;
  options.replay.initial_backoff = std::chrono::milliseconds(1);
  options.replay.max_backoff = std::chrono::milliseconds(4);
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ChunkRun run;
  {
    RecordWriter writer(out, OutputFormat::kText, true);
    run.status = ChunkFile(
        stub.get(), options, name, &writer,
        [](InputFile* input) {
          return std::make_unique<Progress>(nullptr, input->name(),
                                            input->size());
        },
        err);
  }
  run.out = ReadAll(out);
  run.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return run;
}

TEST(ChunkFileTest, AReplayPrintsEveryChunkOnce) {
  FakeServer server;
  const ChunkRun clean = Chunk(server, 0);
  ASSERT_TRUE(clean.status.ok()) << clean.status;
  const std::vector<std::string> lines =
      absl::StrSplit(clean.out, '\n', absl::SkipEmpty());
  ASSERT_GT(lines.size(), 2u);

  // Two streams fail after their first batch (all chunks but the last):
  // the replays print only the last one.
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
  server.service().chunk_failures = 2;
  const int streams_before = server.service().chunk_streams;
  const ChunkRun replayed = Chunk(server, 2);
  ASSERT_TRUE(replayed.status.ok()) << replayed.status;
  EXPECT_EQ(replayed.out, clean.out);
  EXPECT_EQ(server.service().chunk_streams - streams_before, 3);
  const std::vector<std::string> notes =
      absl::StrSplit(replayed.err, '\n', absl::SkipEmpty());
  ASSERT_THAT(notes, SizeIs(2)) << replayed.err;
  EXPECT_THAT(notes[0],
              MatchesRegex("chunkctl: .*SekienAkashita.jpg: UNAVAILABLE: "
                           "restarting; sending it again in 0.00 s \\(retry "
                           "1 of 2\\)"));
  EXPECT_THAT(notes[1], HasSubstr("(retry 2 of 2)"));
}

TEST(ChunkFileTest, WithoutRetriesTheFirstFailureIsFinal) {
  FakeServer server;
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::CANCELLED, "reset by a proxy");
  server.service().chunk_failures = 1;
  const ChunkRun run = Chunk(server, 0);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(run.status.message(), "CANCELLED: reset by a proxy");
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(server.service().chunk_streams, 1);
  // With retries, a CANCELLED chunkctl did not cause is replayed.
  server.service().chunk_failures = 1;
  const ChunkRun replayed = Chunk(server, 1);
  EXPECT_TRUE(replayed.status.ok()) << replayed.status;
  EXPECT_THAT(replayed.err, HasSubstr("CANCELLED: reset by a proxy; "));
}

TEST(ChunkFileTest, AReplayThatCutsOtherwiseIsDataLoss) {
  FakeServer server;
  server.service().fail_status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
  server.service().chunk_failures = 1;
  server.service().altered_from = 2;  // the replay's fingerprints differ
  const ChunkRun run = Chunk(server, 3);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(run.status.message()),
              HasSubstr("the replayed stream has "));
  EXPECT_THAT(std::string(run.status.message()),
              HasSubstr("differ from the"));
  // Final: not replayed again, and nothing of the replay printed.
  EXPECT_EQ(server.service().chunk_streams, 2);
  const std::vector<std::string> lines =
      absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  const std::vector<std::string> notes =
      absl::StrSplit(run.err, '\n', absl::SkipEmpty());
  EXPECT_THAT(notes, SizeIs(1));
  ASSERT_FALSE(lines.empty());
  EXPECT_THAT(lines[0], StartsWith("0,"));
}

// A stdin that delivers some bytes and then stalls without closing: the
// call still ends at its deadline, without waiting for the input.
TEST(ChunkFileTest, ADeadlineEndsTheCallWhileTheInputStalls) {
  FakeServer server;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string data(50000, 'x');  // within the pipe's 64 KiB buffer
  ASSERT_EQ(::write(fds[1], data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  const int saved_stdin = ::dup(STDIN_FILENO);
  ASSERT_EQ(::dup2(fds[0], STDIN_FILENO), STDIN_FILENO);
  ConnectOptions connect;
  connect.address = server.address();
  auto stub = chunkd::v1::ChunkService::NewStub(MakeChannel(connect));
  ChunkFileOptions options;
  options.timeout = std::chrono::milliseconds(300);
  std::FILE* out = std::tmpfile();
  RecordWriter writer(out, OutputFormat::kText, true);
  std::future<absl::Status> done = std::async(std::launch::async, [&] {
    return ChunkFile(
        stub.get(), options, "-", &writer,
        [](InputFile* input) {
          return std::make_unique<Progress>(nullptr, input->name(), 0);
        },
        nullptr);
  });
  const bool ended =
      done.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  ::close(fds[1]);  // lets an old chunkctl's read return, so the test ends
  EXPECT_TRUE(ended) << "the call waited for the stalled input";
  const absl::Status status = done.get();
  ::dup2(saved_stdin, STDIN_FILENO);
  ::close(saved_stdin);
  ::close(fds[0]);
  std::fclose(out);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

}  // namespace
}  // namespace chunkd::cli
