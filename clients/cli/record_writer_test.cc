#include "clients/cli/record_writer.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>

#include "clients/cli/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

using ::chunkd::cli::testing::ReadAll;

std::string Write(OutputFormat format, bool with_fingerprint) {
  std::FILE* file = std::tmpfile();
  RecordWriter writer(file, format, with_fingerprint);
  writer.Add(0, 19186, std::string("\x0f\x9e\xfa", 3));
  writer.Add(19186, 1, "");
  EXPECT_TRUE(writer.Flush().ok());
  writer.Add(18446744073709551615u, 4294967295u, std::string("\xff", 1));
  EXPECT_TRUE(writer.Flush().ok());
  std::string contents = ReadAll(file);
  std::fclose(file);
  return contents;
}

TEST(RecordWriterTest, Csv) {
  EXPECT_EQ(Write(OutputFormat::kText, true),
            "0,19186,0f9efa\n"
            "19186,1,\n"
            "18446744073709551615,4294967295,ff\n");
}

TEST(RecordWriterTest, CsvWithoutFingerprints) {
  EXPECT_EQ(Write(OutputFormat::kText, false),
            "0,19186\n"
            "19186,1\n"
            "18446744073709551615,4294967295\n");
}

TEST(RecordWriterTest, Json) {
  EXPECT_EQ(Write(OutputFormat::kJson, true),
            "{\"offset\":0,\"length\":19186,\"fingerprint\":\"0f9efa\"}\n"
            "{\"offset\":19186,\"length\":1,\"fingerprint\":\"\"}\n"
            "{\"offset\":18446744073709551615,\"length\":4294967295,"
            "\"fingerprint\":\"ff\"}\n");
}

TEST(RecordWriterTest, JsonWithoutFingerprints) {
  EXPECT_EQ(Write(OutputFormat::kJson, false),
            "{\"offset\":0,\"length\":19186}\n"
            "{\"offset\":19186,\"length\":1}\n"
            "{\"offset\":18446744073709551615,\"length\":4294967295}\n");
}

TEST(RecordWriterTest, ReportsWriteErrors) {
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) GTEST_SKIP() << "no /dev/full";
  RecordWriter writer(full, OutputFormat::kText, false);
  writer.Add(0, 1, "");
  absl::Status status = writer.Flush();
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(IsBrokenPipe(status));
  EXPECT_THAT(std::string(status.message()), HasSubstr("writing output: "));
  std::fclose(full);
}

TEST(RecordWriterTest, AClosedPipeIsBrokenPipe) {
  EXPECT_TRUE(IsBrokenPipe(WriteError(EPIPE)));
  EXPECT_FALSE(IsBrokenPipe(WriteError(ENOSPC)));
  EXPECT_FALSE(IsBrokenPipe(absl::CancelledError("CANCELLED: by the server")));
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  std::FILE* pipe = ::fdopen(fds[1], "w");
  ASSERT_NE(pipe, nullptr);
  // With SIGPIPE ignored, as chunkctl's main() has it, a write to a pipe
  // nobody reads fails with EPIPE.
  void (*const previous)(int) = std::signal(SIGPIPE, SIG_IGN);
  RecordWriter writer(pipe, OutputFormat::kText, false);
  writer.Add(0, 1, "");
  EXPECT_TRUE(IsBrokenPipe(writer.Flush()));
  std::signal(SIGPIPE, previous);
  std::fclose(pipe);
}

TEST(ParseOutputFormatTest, Names) {
  EXPECT_EQ(*ParseOutputFormat("text"), OutputFormat::kText);
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kText);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_FALSE(ParseOutputFormat("TEXT").ok());
  EXPECT_FALSE(ParseOutputFormat("CSV").ok());
  EXPECT_FALSE(ParseOutputFormat("").ok());
}

}  // namespace
}  // namespace chunkd::cli
