#include "metrics/process_metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chunkd::metrics {
namespace {

using ::testing::HasSubstr;

// A /proc/<pid>/stat line whose command name holds a space and parentheses:
// utime 250 and stime 50 ticks, starttime 12345 ticks after boot, vsize
// 1048576000 bytes, rss 25000 pages.
constexpr char kStat[] =
    "1234 (chunk d) (x)) S 1 1234 1234 0 -1 4194560 2000 0 0 0 250 50 0 0 "
    "20 0 9 0 12345 1048576000 25000 18446744073709551615 1 1 0 0 0 0 0 "
    "4096 0 0 0 17 1 0 0 0 0 0\n";

constexpr char kProcStat[] =
    "cpu  7460 23 2540 1287440 530 0 171 0 0 0\n"
    "cpu0 3730 11 1270 643720 265 0 85 0 0 0\n"
    "intr 1160529 0 9 0 0\n"
    "ctxt 2170458\n"
    "btime 1764100000\n"
    "processes 12402\n";

constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           "
    "Units     \n"
    "Max cpu time              unlimited            unlimited            "
    "seconds   \n"
    "Max open files            1024                 524288               "
    "files     \n"
    "Max locked memory         8388608              8388608              "
    "bytes     \n";

TEST(ParseProcStatTest, ReadsTheFieldsAfterTheLastParenthesis) {
  absl::StatusOr<ProcStat> stat = ParseProcStat(kStat, 100, 4096);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_DOUBLE_EQ(stat->cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(stat->start_seconds_after_boot, 123.45);
  EXPECT_DOUBLE_EQ(stat->virtual_bytes, 1048576000.0);
  EXPECT_DOUBLE_EQ(stat->resident_bytes, 25000.0 * 4096);
}

TEST(ParseProcStatTest, UsesTheGivenTicksAndPageSize) {
  absl::StatusOr<ProcStat> stat = ParseProcStat(kStat, 1000, 65536);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_DOUBLE_EQ(stat->cpu_seconds, 0.3);
  EXPECT_DOUBLE_EQ(stat->start_seconds_after_boot, 12.345);
  EXPECT_DOUBLE_EQ(stat->resident_bytes, 25000.0 * 65536);
}

TEST(ParseProcStatTest, RefusesWhatIsNotAStatLine) {
  EXPECT_THAT(
      ParseProcStat("1234 chunkd S 1 2 3", 100, 4096).status().message(),
      HasSubstr("no ')'"));
  EXPECT_THAT(
      ParseProcStat("1234 (chunkd) S 1 2 3", 100, 4096).status().message(),
      HasSubstr("has 6 fields"));
  std::string bad = kStat;
  bad.replace(bad.find(" 250 "), 5, " x50 ");
  EXPECT_THAT(ParseProcStat(bad, 100, 4096).status().message(),
              HasSubstr("field 14 of /proc/<pid>/stat is not a count: 'x50'"));
  EXPECT_FALSE(ParseProcStat(kStat, 0, 4096).ok());
  EXPECT_FALSE(ParseProcStat(kStat, 100, 0).ok());
}

TEST(ParseBootTimeTest, ReadsTheBtimeLine) {
  absl::StatusOr<double> boot = ParseBootTime(kProcStat);
  ASSERT_TRUE(boot.ok()) << boot.status();
  EXPECT_DOUBLE_EQ(*boot, 1764100000.0);
  EXPECT_THAT(ParseBootTime("cpu 1 2 3\nctxt 5\n").status().message(),
              HasSubstr("no btime line"));
  EXPECT_THAT(ParseBootTime("btime soon\n").status().message(),
              HasSubstr("'soon'"));
}

TEST(ParseMaxOpenFilesTest, ReadsTheSoftLimit) {
  absl::StatusOr<double> max = ParseMaxOpenFiles(kLimits);
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_DOUBLE_EQ(*max, 1024.0);
  max = ParseMaxOpenFiles(
      "Max open files            unlimited            unlimited    files\n");
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_TRUE(std::isinf(*max));
  EXPECT_THAT(ParseMaxOpenFiles("Max cpu time  unlimited unlimited seconds\n")
                  .status()
                  .message(),
              HasSubstr("no Max open files line"));
  EXPECT_THAT(ParseMaxOpenFiles("Max open files   many   many   files\n")
                  .status()
                  .message(),
              HasSubstr("'many'"));
}

// name -> (type, value) of each family, which must hold one unlabelled
// sample.
std::map<std::string, std::pair<prometheus::MetricType, double>> Samples(
    const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, std::pair<prometheus::MetricType, double>> samples;
  for (const prometheus::MetricFamily& family : families) {
    EXPECT_EQ(family.metric.size(), 1u) << family.name;
    EXPECT_FALSE(family.help.empty()) << family.name;
    if (family.metric.empty()) continue;
    const prometheus::ClientMetric& m = family.metric[0];
    EXPECT_TRUE(m.label.empty()) << family.name;
    samples[family.name] = {family.type,
                            family.type == prometheus::MetricType::Counter
                                ? m.counter.value
                                : m.gauge.value};
  }
  EXPECT_EQ(samples.size(), families.size()) << "a family twice";
  return samples;
}

// A fake proc root in the test's temporary directory.
class FakeProc {
 public:
  explicit FakeProc(const std::string& name)
      : root_(std::filesystem::path(::testing::TempDir()) / name) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "self" / "fd");
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    std::ofstream(root_ / path) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  const std::filesystem::path root_;
};

TEST(ProcessCollectorTest, ReportsEveryFamilyFromTheProcFiles) {
  FakeProc proc("process_collector_all");
  proc.Write("self/stat", kStat);
  proc.Write("self/limits", kLimits);
  proc.Write("stat", kProcStat);
  for (const char* fd : {"0", "1", "2", "7"}) {
    proc.Write(absl::StrCat("self/fd/", fd), "");
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));

  const auto samples = Samples(ProcessCollector(proc.root()).Collect());
  using prometheus::MetricType;
  const std::map<std::string, std::pair<MetricType, double>> want = {
      {"process_cpu_seconds_total", {MetricType::Counter, 300 / ticks}},
      {"process_open_fds", {MetricType::Gauge, 4}},
      {"process_max_fds", {MetricType::Gauge, 1024}},
      {"process_virtual_memory_bytes", {MetricType::Gauge, 1048576000.0}},
      {"process_resident_memory_bytes", {MetricType::Gauge, 25000 * page}},
      {"process_start_time_seconds",
       {MetricType::Gauge, 1764100000.0 + 12345 / ticks}},
  };
  EXPECT_EQ(samples, want);
}

TEST(ProcessCollectorTest, LeavesOutWhatItCannotRead) {
  FakeProc proc("process_collector_partial");
  proc.Write("self/limits", "Max open files   bad   bad   files\n");
  proc.Write("self/fd/3", "");
  // No self/stat: CPU, memory and start time are left out; a bad limits
  // file leaves out process_max_fds.
  auto samples = Samples(ProcessCollector(proc.root()).Collect());
  EXPECT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples["process_open_fds"].second, 1);

  // A stat without /proc/stat's boot time: all but the start time.
  proc.Write("self/stat", kStat);
  samples = Samples(ProcessCollector(proc.root()).Collect());
  EXPECT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples.count("process_start_time_seconds"), 0u);
  EXPECT_EQ(samples.count("process_resident_memory_bytes"), 1u);

  EXPECT_TRUE(ProcessCollector(proc.root() + "/missing").Collect().empty());
}

TEST(ProcessCollectorTest, ThisProcessIsPlausible) {
  const double now = static_cast<double>(std::time(nullptr));
  auto samples = Samples(ProcessCollector().Collect());
  ASSERT_EQ(samples.size(), 6u);
  EXPECT_GT(samples["process_resident_memory_bytes"].second, 0);
  EXPECT_GE(samples["process_virtual_memory_bytes"].second,
            samples["process_resident_memory_bytes"].second);
  EXPECT_GE(samples["process_cpu_seconds_total"].second, 0);
  // This test's process started moments ago (boot time and start ticks
  // round to a second each).
  EXPECT_LE(samples["process_start_time_seconds"].second, now + 2);
  EXPECT_GT(samples["process_start_time_seconds"].second, now - 600);
  EXPECT_GE(samples["process_max_fds"].second,
            samples["process_open_fds"].second);

  // One more open file, one more descriptor.
  const double before = samples["process_open_fds"].second;
  const int fd = open("/proc/self/stat", O_RDONLY);
  ASSERT_GE(fd, 0);
  samples = Samples(ProcessCollector().Collect());
  close(fd);
  EXPECT_EQ(samples["process_open_fds"].second, before + 1);
}

}  // namespace
}  // namespace chunkd::metrics
