#include "clients/cli/record_writer.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

// Everything written to a temporary file.
std::string Contents(std::FILE* file) {
  std::rewind(file);
  std::string contents;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    contents.append(buffer, n);
  }
  return contents;
}

std::string Write(OutputFormat format, bool with_fingerprint) {
  std::FILE* file = std::tmpfile();
  RecordWriter writer(file, format, with_fingerprint);
  writer.Add(0, 19186, std::string("\x0f\x9e\xfa", 3));
  writer.Add(19186, 1, "");
  EXPECT_TRUE(writer.Flush().ok());
  writer.Add(18446744073709551615u, 4294967295u, std::string("\xff", 1));
  EXPECT_TRUE(writer.Flush().ok());
  std::string contents = Contents(file);
  std::fclose(file);
  return contents;
}

TEST(RecordWriterTest, Csv) {
  EXPECT_EQ(Write(OutputFormat::kCsv, true),
            "0,19186,0f9efa\n"
            "19186,1,\n"
            "18446744073709551615,4294967295,ff\n");
}

TEST(RecordWriterTest, CsvWithoutFingerprints) {
  EXPECT_EQ(Write(OutputFormat::kCsv, false),
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
  RecordWriter writer(full, OutputFormat::kCsv, false);
  writer.Add(0, 1, "");
  absl::Status status = writer.Flush();
  EXPECT_FALSE(status.ok());
  std::fclose(full);
}

TEST(ParseOutputFormatTest, Names) {
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_FALSE(ParseOutputFormat("CSV").ok());
  EXPECT_FALSE(ParseOutputFormat("").ok());
}

}  // namespace
}  // namespace chunkd::cli
