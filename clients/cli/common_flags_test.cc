#include "clients/cli/common_flags.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

ParsedArgs Parse(const std::vector<std::string>& words) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(words, WithOutputFlags(WithConnectionFlags({})));
  EXPECT_TRUE(args.ok()) << args.status();
  return args.value_or(ParsedArgs());
}

TEST(CommonFlagsTest, EveryFlagTakesBothSpellings) {
  const std::vector<std::string> dashed = {
      "--server",          "--tls-ca",  "--tls-cert",   "--tls-key",
      "--tls-server-name", "--token",   "--token-file", "--timeout",
      "--format",          "--progress"};
  for (const std::string& flag : dashed) {
    std::string underscored = flag;
    for (size_t i = 2; i < underscored.size(); ++i) {
      if (underscored[i] == '-') underscored[i] = '_';
    }
    for (const std::string& spelling : {flag, underscored}) {
      absl::StatusOr<ParsedArgs> args =
          ParseArgs({spelling, "v"}, WithOutputFlags(WithConnectionFlags({})));
      ASSERT_TRUE(args.ok()) << spelling << ": " << args.status();
      EXPECT_EQ(args->Get(flag.substr(2)), "v") << spelling;
    }
    // The two spellings are one flag: giving both is giving it twice.
    if (underscored != flag) {
      absl::StatusOr<ParsedArgs> args =
          ParseArgs({flag, "a", underscored + "=b"},
                    WithOutputFlags(WithConnectionFlags({})));
      ASSERT_FALSE(args.ok()) << flag;
      EXPECT_THAT(std::string(args.status().message()),
                  HasSubstr("given more than once"));
    }
  }
}

TEST(CommonFlagsTest, ServerDefaultsToTheEnvironmentThenLoopback) {
  ASSERT_EQ(::unsetenv("CHUNKD_SERVER"), 0);
  EXPECT_EQ(ConnectOptionsFromArgs(Parse({}))->address, "127.0.0.1:50051");
  ASSERT_EQ(::setenv("CHUNKD_SERVER", "", 1), 0);
  EXPECT_EQ(ConnectOptionsFromArgs(Parse({}))->address, "127.0.0.1:50051");
  ASSERT_EQ(::setenv("CHUNKD_SERVER", "dns:///chunkd.ns.svc:50051", 1), 0);
  EXPECT_EQ(ConnectOptionsFromArgs(Parse({}))->address,
            "dns:///chunkd.ns.svc:50051");
  // The flag wins.
  EXPECT_EQ(ConnectOptionsFromArgs(Parse({"--server", "h:1"}))->address, "h:1");
  ASSERT_EQ(::unsetenv("CHUNKD_SERVER"), 0);
  EXPECT_FALSE(ConnectOptionsFromArgs(Parse({"--server="})).ok());
}

TEST(CommonFlagsTest, TlsServerNameImpliesTls) {
  absl::StatusOr<ConnectOptions> options =
      ConnectOptionsFromArgs(Parse({"--tls_server_name", "chunkd.example"}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->tls);
  EXPECT_EQ(options->tls_server_name, "chunkd.example");
  options = ConnectOptionsFromArgs(Parse({}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->tls);
  EXPECT_EQ(options->tls_server_name, "");
}

TEST(ParseTimeoutTest, SecondsWithDecimals) {
  EXPECT_EQ(*ParseTimeout("0"), nanoseconds::zero());
  EXPECT_EQ(*ParseTimeout("30"), seconds(30));
  EXPECT_EQ(*ParseTimeout("0.5"), milliseconds(500));
  EXPECT_EQ(*ParseTimeout(".25"), milliseconds(250));
  EXPECT_EQ(*ParseTimeout("2."), seconds(2));
  EXPECT_EQ(*ParseTimeout("0.000000001"), nanoseconds(1));
  EXPECT_EQ(*ParseTimeout("31536000"), seconds(31536000));
}

TEST(ParseTimeoutTest, RejectsAnythingElse) {
  for (const char* text : {"", ".", "-1", "+1", " 1", "1 ", "30s", "1e3", "inf",
                           "nan", "0x10", "1.2.3", "31536001"}) {
    absl::StatusOr<nanoseconds> timeout = ParseTimeout(text);
    ASSERT_FALSE(timeout.ok()) << text;
    EXPECT_EQ(timeout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(timeout.status().message()),
                HasSubstr("--timeout: expected seconds"))
        << text;
  }
  EXPECT_EQ(*TimeoutFromArgs(Parse({})), nanoseconds::zero());
  EXPECT_EQ(*TimeoutFromArgs(Parse({"--timeout=1.5"})), milliseconds(1500));
}

TEST(OutputFormatTest, FormatAndJson) {
  EXPECT_EQ(*OutputFormatFromArgs(Parse({})), OutputFormat::kText);
  EXPECT_EQ(*OutputFormatFromArgs(Parse({"--json"})), OutputFormat::kJson);
  EXPECT_EQ(*OutputFormatFromArgs(Parse({"--format", "json"})),
            OutputFormat::kJson);
  EXPECT_EQ(*OutputFormatFromArgs(Parse({"--format", "csv"})),
            OutputFormat::kText);
  EXPECT_EQ(*OutputFormatFromArgs(Parse({"--format", "text"})),
            OutputFormat::kText);
  EXPECT_EQ(*OutputFormatFromArgs(Parse({"--json", "--format", "json"})),
            OutputFormat::kJson);
  absl::StatusOr<OutputFormat> both =
      OutputFormatFromArgs(Parse({"--json", "--format", "text"}));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(std::string(both.status().message()),
              HasSubstr("--json is --format json"));
  absl::StatusOr<OutputFormat> bad =
      OutputFormatFromArgs(Parse({"--format", "xml"}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("--format: expected text, csv or json"));
  // --json is a switch.
  EXPECT_FALSE(
      ParseArgs({"--json=yes"}, WithOutputFlags(WithConnectionFlags({}))).ok());
}

TEST(ProgressModeTest, NamesAndTargets) {
  EXPECT_EQ(*ProgressModeFromArgs(Parse({})), ProgressMode::kAuto);
  EXPECT_EQ(*ParseProgressMode("always"), ProgressMode::kAlways);
  EXPECT_EQ(*ParseProgressMode("never"), ProgressMode::kNever);
  EXPECT_EQ(*ParseProgressMode("auto"), ProgressMode::kAuto);
  EXPECT_FALSE(ParseProgressMode("yes").ok());
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(ProgressTarget(ProgressMode::kAlways, file), file);
  EXPECT_EQ(ProgressTarget(ProgressMode::kNever, file), nullptr);
  EXPECT_EQ(ProgressTarget(ProgressMode::kAuto, file), nullptr);  // no tty
  std::fclose(file);
}

}  // namespace
}  // namespace chunkd::cli
