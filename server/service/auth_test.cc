#include "service/auth.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

using ::testing::HasSubstr;

constexpr char kTable[] =
    "# tokens for the test\n"
    "\n"
    "team-a-0123456789abcdef  team-a,team-a-staging\n"
    "  admin-0123456789abcdef\t*  \n";

TEST(TokenTableTest, KnownTokenWithItsNamespaces) {
  auto table = TokenTable::Parse(kTable);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  EXPECT_TRUE(table->Authenticate("Bearer team-a-0123456789abcdef").ok());
  EXPECT_TRUE(table->Authenticate("bearer admin-0123456789abcdef").ok());
  EXPECT_TRUE(
      table->Authorize("Bearer team-a-0123456789abcdef", "team-a-staging").ok());
  EXPECT_TRUE(table->Authorize("Bearer admin-0123456789abcdef", "any").ok());

  absl::Status denied =
      table->Authorize("Bearer team-a-0123456789abcdef", "team-b");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("'team-b'"));
}

TEST(TokenTableTest, MissingMalformedOrUnknownTokenIsUnauthenticated) {
  auto table = TokenTable::Parse(kTable);
  ASSERT_TRUE(table.ok());
  for (const char* metadata :
       {"", "team-a-0123456789abcdef", "Basic dXNlcjpwYXNz", "Bearer ",
        "Bearer team-a-0123456789abcdeX"}) {
    absl::Status status = table->Authorize(metadata, "team-a");
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated) << metadata;
    EXPECT_THAT(std::string(status.message()), HasSubstr("earer")) << metadata;
  }
  // The message never echoes what the client sent.
  absl::Status unknown = table->Authenticate("Bearer not-a-known-token-at-all");
  EXPECT_THAT(std::string(unknown.message()),
              ::testing::Not(HasSubstr("not-a-known")));
}

TEST(TokenTableTest, BadFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : {
           Case{"only-one-field-0123456789\n", "line 1: expected"},
           Case{"# c\nshort ns\n", "line 2: the token has 5 characters"},
           Case{"tok-0123456789abcdef a\ntok-0123456789abcdef b\n",
                "line 2: the token repeats"},
           Case{"tok-0123456789abcdef a,,b\n", "line 1: "},
           Case{"# nothing\n\n", "no tokens"},
       }) {
    auto table = TokenTable::Parse(c.text);
    ASSERT_FALSE(table.ok()) << c.text;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(table.status().message(), HasSubstr(c.error)) << c.text;
  }
}

TEST(TokenTableTest, LoadNamesTheFile) {
  auto missing = TokenTable::Load("/nonexistent/tokens");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("--auth_tokens /nonexistent/tokens: cannot open"));

  const std::string path = ::testing::TempDir() + "/chunkd_tokens";
  {
    std::ofstream out(path);
    out << kTable;
  }
  auto table = TokenTable::Load(path);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 2u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace chunkd::service
