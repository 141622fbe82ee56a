#include "clients/cli/args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kSpecs = {
    {"server"}, {"local", false}, {"min"}, {"help", false}};

TEST(ParseArgsTest, AcceptsBothValueFormsSwitchesAndPositionals) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      {"--server", "host:1", "a", "--min=42", "--local", "-", "b"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->Get("server"), "host:1");
  EXPECT_EQ(args->Get("min"), "42");
  EXPECT_TRUE(args->Has("local"));
  EXPECT_FALSE(args->Has("help"));
  EXPECT_EQ(args->Get("help"), std::nullopt);
  EXPECT_THAT(args->positional(), ElementsAre("a", "-", "b"));
}

TEST(ParseArgsTest, DoubleDashEndsFlags) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs({"--local", "--", "--min", "-h"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->Has("min"));
  EXPECT_THAT(args->positional(), ElementsAre("--min", "-h"));
}

TEST(ParseArgsTest, ValueMayLookLikeAFlagOrBeEmpty) {
  absl::StatusOr<ParsedArgs> args = ParseArgs({"--min", "-5"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->Get("min"), "-5");
  args = ParseArgs({"--min="}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->Get("min"), "");
}

TEST(ParseArgsTest, UnderscoresSpellTheSameFlag) {
  const std::vector<FlagSpec> specs = {
      {"seq-length"}, {"tls-ca"}, {"skip-size"}, {"no-wait", false}};
  absl::StatusOr<ParsedArgs> args =
      ParseArgs({"--seq_length", "4", "--tls_ca=ca.pem", "--skip-size", "9",
                 "--no_wait"},
                specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->Get("seq-length"), "4");
  EXPECT_EQ(args->Get("tls-ca"), "ca.pem");
  EXPECT_EQ(args->Get("skip-size"), "9");
  EXPECT_TRUE(args->Has("no-wait"));
  // Lookups use the dash spelling only.
  EXPECT_FALSE(args->Has("seq_length"));
  // Either spelling twice is the flag twice; an unknown flag is named as
  // given.
  args = ParseArgs({"--tls-ca", "a", "--tls_ca", "b"}, specs);
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(std::string(args.status().message()),
              HasSubstr("flag --tls-ca given more than once"));
  args = ParseArgs({"--tls_cb", "a"}, specs);
  ASSERT_FALSE(args.ok());
  EXPECT_THAT(std::string(args.status().message()),
              HasSubstr("unknown flag \"--tls_cb\""));
  // Values keep their underscores.
  args = ParseArgs({"--tls-ca", "my_ca.pem"}, specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->Get("tls-ca"), "my_ca.pem");
}

TEST(ParseArgsTest, RepeatableFlagKeepsEveryValueInOrder) {
  const std::vector<FlagSpec> specs = {{"set", true, true}, {"min"}};
  absl::StatusOr<ParsedArgs> args =
      ParseArgs({"--set", "a", "--set=b", "--min", "1", "--set", "a"}, specs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(args->GetAll("set"), ElementsAre("a", "b", "a"));
  EXPECT_EQ(args->Get("set"), "a");
  EXPECT_THAT(args->GetAll("min"), ElementsAre("1"));
  EXPECT_TRUE(args->GetAll("help").empty());
  // A flag that is not repeatable still may be given once only.
  absl::StatusOr<ParsedArgs> twice =
      ParseArgs({"--min", "1", "--min", "2"}, specs);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("--min given more than once"));
}

TEST(ParseArgsTest, DashHIsHelp) {
  absl::StatusOr<ParsedArgs> args = ParseArgs({"-h"}, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_TRUE(args->Has("help"));
}

TEST(ParseArgsTest, RejectsBadCommandLines) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--nope"}, "unknown flag \"--nope\""},
           {{"--nope=1"}, "unknown flag \"--nope\""},
           {{"-x"}, "unknown flag \"-x\""},
           {{"--server"}, "flag --server needs a value"},
           {{"--local=yes"}, "flag --local takes no value"},
           {{"--min", "1", "--min=2"}, "flag --min given more than once"},
       }) {
    absl::StatusOr<ParsedArgs> args = ParseArgs(c.args, kSpecs);
    ASSERT_FALSE(args.ok()) << c.args[0];
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(args.status().message()), HasSubstr(c.message));
  }
}

TEST(WantsHelpTest, FindsHelpBeforeDoubleDash) {
  EXPECT_TRUE(WantsHelp({"--local", "--help"}));
  EXPECT_TRUE(WantsHelp({"-h", "--unknown"}));
  EXPECT_FALSE(WantsHelp({"--local", "--", "--help"}));
  EXPECT_FALSE(WantsHelp({}));
}

TEST(ParseUintTest, AcceptsDecimalAndHexWithinRange) {
  EXPECT_EQ(*ParseUint("min", "0", 10), 0u);
  EXPECT_EQ(*ParseUint("min", "10", 10), 10u);
  EXPECT_EQ(*ParseUint("seed", "0x29A", 1000), 666u);
  EXPECT_EQ(*ParseUint("seed", "18446744073709551615", ~uint64_t{0}),
            ~uint64_t{0});
}

TEST(ParseUintTest, RejectsAnythingElse) {
  for (const char* text : {"", "-1", "+1", " 1", "1 ", "1k", "0x", "0xg", "1.5",
                           "11", "18446744073709551616"}) {
    absl::StatusOr<uint64_t> value = ParseUint("min", text, 10);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_THAT(std::string(value.status().message()),
                HasSubstr("--min: expected an integer in 0..10"))
        << text;
  }
}

}  // namespace
}  // namespace chunkd::cli
