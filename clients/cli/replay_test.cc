#include "clients/cli/replay.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "clients/cli/record_writer.h"
#include "clients/cli/remote.h"
#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::SizeIs;

using ::chunkd::cli::testing::ReadAll;

TEST(IsRetryableTest, TransientCodesOnly) {
  for (absl::StatusCode code :
       {absl::StatusCode::kUnavailable, absl::StatusCode::kAborted,
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
        absl::StatusCode::kCancelled}) {
    EXPECT_TRUE(IsRetryable(absl::Status(code, "x"), false)) << code;
  }
  EXPECT_TRUE(IsRetryable(absl::DeadlineExceededError("x"), true));
  EXPECT_FALSE(IsRetryable(absl::DeadlineExceededError("x"), false));
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss,
        absl::StatusCode::kNotFound, absl::StatusCode::kPermissionDenied,
        absl::StatusCode::kUnauthenticated,
        absl::StatusCode::kFailedPrecondition}) {
    EXPECT_FALSE(IsRetryable(absl::Status(code, "x"), true)) << code;
  }
}

TEST(IsRetryableTest, NeverChunkctlsOwnErrors) {
  // A closed standard output is CANCELLED too, and final.
  EXPECT_FALSE(IsRetryable(BrokenPipeError(), true));
  // An output that fails otherwise is UNAVAILABLE, and chunkctl's own.
  EXPECT_FALSE(IsRetryable(ClientFound(WriteError(ENOSPC)), true));
  EXPECT_FALSE(
      IsRetryable(ClientFound(absl::UnavailableError("protocol")), true));
  EXPECT_TRUE(IsRetryable(WriteError(ENOSPC), true));  // unmarked: a server's
}

TEST(ReplayFileTest, ReplaysWhileRetryableAndAnnouncesEach) {
  ReplayOptions options;
  options.retries = 3;
  options.initial_backoff = std::chrono::milliseconds(2);
  options.max_backoff = std::chrono::milliseconds(4);
  std::FILE* err = std::tmpfile();
  std::vector<absl::Status> outcomes = {
      absl::UnavailableError("UNAVAILABLE: down"),
      absl::CancelledError("CANCELLED: reset"), absl::OkStatus()};
  size_t attempts = 0;
  EXPECT_TRUE(
      ReplayFile(options, "f.bin", err, [&] { return outcomes[attempts++]; })
          .ok());
  EXPECT_EQ(attempts, 3u);
  const std::vector<std::string> lines =
      absl::StrSplit(ReadAll(err), '\n', absl::SkipEmpty());
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(lines[0], MatchesRegex("chunkctl: f.bin: UNAVAILABLE: down; "
                                     "sending it again in 0.00 s \\(retry 1 "
                                     "of 3\\)"));
  EXPECT_THAT(lines[1], HasSubstr("CANCELLED: reset; sending it again in "));
  EXPECT_THAT(lines[1], HasSubstr("(retry 2 of 3)"));
  std::fclose(err);
}

TEST(ReplayFileTest, StopsAtAFinalErrorOrTheCap) {
  ReplayOptions options;
  options.retries = 2;
  options.initial_backoff = std::chrono::milliseconds(1);
  std::FILE* err = std::tmpfile();
  int attempts = 0;
  absl::Status status = ReplayFile(options, "f", err, [&] {
    ++attempts;
    return absl::UnavailableError("UNAVAILABLE: down");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(attempts, 3);
  attempts = 0;
  status = ReplayFile(options, "f", err, [&] {
    ++attempts;
    return absl::InvalidArgumentError("INVALID_ARGUMENT: no");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(attempts, 1);
  std::fclose(err);
}

TEST(CheckReplayableTest, RegularFilesOnly) {
  char path[] = "/tmp/chunkctl-replay-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_TRUE(CheckReplayable({path}).ok());
  const absl::Status dash = CheckReplayable({path, "-"});
  EXPECT_EQ(dash.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dash.message()), HasSubstr("stdin"));
  const absl::Status dev = CheckReplayable({"/dev/null"});
  EXPECT_EQ(dev.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(dev.message()),
              HasSubstr("/dev/null is not a regular file"));
  EXPECT_EQ(CheckReplayable({"/nonexistent/x"}).code(),
            absl::StatusCode::kNotFound);
  ::unlink(path);
}

// Records [0,10) [10,20) [20,25) with one-byte fingerprints "a" "b" "c".
void Deliver(DeliveredRecords* delivered, int count) {
  const std::vector<std::pair<uint64_t, uint32_t>> spans = {
      {0, 10}, {10, 10}, {20, 5}};
  const std::string fingerprints = "abc";
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<bool> fresh =
        delivered->Take(spans[i].first, spans[i].second,
                        fingerprints.substr(i, 1));
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_TRUE(*fresh);
  }
}

TEST(DeliveredRecordsTest, AReplayThatRepeatsGoesOn) {
  DeliveredRecords delivered;
  delivered.StartAttempt();
  Deliver(&delivered, 2);
  delivered.StartAttempt();
  EXPECT_FALSE(*delivered.Take(0, 10, "a"));
  EXPECT_FALSE(*delivered.Take(10, 10, "b"));
  EXPECT_TRUE(*delivered.Take(20, 5, "c"));
  EXPECT_TRUE(delivered.CheckSummary(25, 3).ok());
  const absl::Status wrong = delivered.CheckSummary(25, 4);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(FoundByClient(wrong));
}

TEST(DeliveredRecordsTest, AReplayThatCutsOtherwiseIsDataLoss) {
  struct Case {
    const char* name;
    std::vector<std::pair<uint64_t, uint32_t>> spans;
    std::string fingerprints;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"other fingerprint", {{0, 10}, {10, 10}}, "ax", "differ"},
           {"other cut", {{0, 5}, {5, 15}}, "ab", "differ"},
           {"across", {{0, 10}, {10, 15}}, "ab", "across offset 20"},
       }) {
    DeliveredRecords delivered;
    delivered.StartAttempt();
    Deliver(&delivered, 2);
    delivered.StartAttempt();
    absl::Status status;
    for (size_t i = 0; i < c.spans.size() && status.ok(); ++i) {
      status = delivered
                   .Take(c.spans[i].first, c.spans[i].second,
                         c.fingerprints.substr(i, 1))
                   .status();
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message)) << c.name;
    EXPECT_TRUE(FoundByClient(status)) << c.name;
  }
  // A replay that ends before the chunks printed end.
  DeliveredRecords shorter;
  shorter.StartAttempt();
  Deliver(&shorter, 2);
  shorter.StartAttempt();
  EXPECT_FALSE(*shorter.Take(0, 10, "a"));
  const absl::Status ended = shorter.CheckSummary(10, 1);
  EXPECT_EQ(ended.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ended.message()), HasSubstr("before offset 20"));
}

}  // namespace
}  // namespace chunkd::cli
