#include "clients/cli/progress.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::cli {
namespace {

using ::testing::HasSubstr;

TEST(ProgressTest, LineWithKnownTotalShowsBarPercentRateAndEta) {
  // 1 MiB of 4 MiB in 2 s: 512 KiB/s, 3 MiB left -> 6 s.
  const std::string line = Progress::Line("in.bin", 1 << 20, 4 << 20, 2.0);
  EXPECT_EQ(line,
            "in.bin [######------------------]  25.0% 1.0 MiB/4.0 MiB "
            "512.0 KiB/s ETA 0:06");
}

TEST(ProgressTest, LineWithUnknownTotalShowsBytesAndRate) {
  EXPECT_EQ(Progress::Line("-", 3000, 0, 1.0), "- 2.9 KiB 2.9 KiB/s");
}

TEST(ProgressTest, EtaInHours) {
  EXPECT_THAT(Progress::Line("x", 1, 7201, 1.0), HasSubstr("ETA 2:00:00"));
}

TEST(ProgressTest, HumanBytes) {
  EXPECT_EQ(Progress::HumanBytes(0), "0 B");
  EXPECT_EQ(Progress::HumanBytes(1023), "1023 B");
  EXPECT_EQ(Progress::HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(Progress::HumanBytes(5.0 * (1ull << 40)), "5.0 TiB");
}

TEST(ProgressTest, InactiveWithoutTerminalAndDrawsOnOne) {
  Progress off(nullptr, "x", 10);
  off.Add(5);
  off.Finish();  // no crash, nothing to see

  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(Progress::IsTerminal(file));
  {
    Progress on(file, "data", 100);
    on.Add(100);
    on.Finish();
  }
  std::rewind(file);
  char buffer[512] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  const std::string text(buffer, n);
  EXPECT_THAT(text, HasSubstr("data [########################] 100.0%"));
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace chunkd::cli
