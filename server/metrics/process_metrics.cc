#include "metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chunkd::metrics {
namespace {

// Fields of /proc/<pid>/stat (proc(5)), counted from 1 at the pid, as
// indexes into the fields after the command name (which is field 2).
constexpr size_t kFirstAfterComm = 3;
constexpr size_t kUtime = 14 - kFirstAfterComm;
constexpr size_t kStime = 15 - kFirstAfterComm;
constexpr size_t kStartTime = 22 - kFirstAfterComm;
constexpr size_t kVsize = 23 - kFirstAfterComm;
constexpr size_t kRss = 24 - kFirstAfterComm;

// The whole of a /proc file (whose size stat() reports as 0); nullopt when
// it cannot be read.
std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(text).str();
}

prometheus::MetricFamily Family(const char* name, const char* help,
                                prometheus::MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {metric}};
}

}  // namespace

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text,
                                       long ticks_per_second, long page_size) {
  if (ticks_per_second <= 0 || page_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("clock ticks per second (", ticks_per_second,
                     ") and page size (", page_size, ") must be positive"));
  }
  const size_t comm_end = text.rfind(')');
  if (comm_end == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "no ')' ending the command name in /proc/<pid>/stat");
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(text.substr(comm_end + 1)), ' ',
                     absl::SkipEmpty());
  if (fields.size() <= kRss) {
    return absl::InvalidArgumentError(absl::StrCat(
        "/proc/<pid>/stat has ", fields.size() + 2, " fields, fewer than the ",
        kRss + kFirstAfterComm, " of rss"));
  }
  uint64_t values[5];
  const size_t indexes[5] = {kUtime, kStime, kStartTime, kVsize, kRss};
  for (int i = 0; i < 5; ++i) {
    if (!absl::SimpleAtoi(fields[indexes[i]], &values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", indexes[i] + kFirstAfterComm,
          " of /proc/<pid>/stat is not a count: '", fields[indexes[i]], "'"));
    }
  }
  const double ticks = static_cast<double>(ticks_per_second);
  ProcStat stat;
  stat.cpu_seconds = static_cast<double>(values[0] + values[1]) / ticks;
  stat.start_seconds_after_boot = static_cast<double>(values[2]) / ticks;
  stat.virtual_bytes = static_cast<double>(values[3]);
  stat.resident_bytes =
      static_cast<double>(values[4]) * static_cast<double>(page_size);
  return stat;
}

absl::StatusOr<double> ParseBootTime(absl::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n')) {
    if (!absl::ConsumePrefix(&line, "btime ")) continue;
    uint64_t seconds = 0;
    if (!absl::SimpleAtoi(line, &seconds)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the btime of /proc/stat is not a count: '", line, "'"));
    }
    return static_cast<double>(seconds);
  }
  return absl::InvalidArgumentError("no btime line in /proc/stat");
}

absl::StatusOr<double> ParseMaxOpenFiles(absl::string_view limits) {
  for (absl::string_view line : absl::StrSplit(limits, '\n')) {
    // "Max open files            1024          1048576          files"
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> columns =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (columns.empty()) break;
    if (columns[0] == "unlimited") {
      return std::numeric_limits<double>::infinity();
    }
    uint64_t soft = 0;
    if (!absl::SimpleAtoi(columns[0], &soft)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the soft limit of Max open files is not a count: '",
                       columns[0], "'"));
    }
    return static_cast<double>(soft);
  }
  return absl::InvalidArgumentError(
      "no Max open files line with a soft limit in /proc/<pid>/limits");
}

ProcessCollector::ProcessCollector(std::string proc)
    : proc_(std::move(proc)),
      ticks_per_second_(sysconf(_SC_CLK_TCK)),
      page_size_(sysconf(_SC_PAGESIZE)) {}

std::optional<double> ProcessCollector::OpenFds() const {
  DIR* dir = opendir(absl::StrCat(proc_, "/self/fd").c_str());
  if (dir == nullptr) return std::nullopt;
  // The directory's own descriptor counts too, as in the client libraries.
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") ++count;
  }
  closedir(dir);
  return count;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> families;
  std::optional<std::string> text = ReadFile(proc_ + "/self/stat");
  absl::StatusOr<ProcStat> stat =
      text.has_value()
          ? ParseProcStat(*text, ticks_per_second_, page_size_)
          : absl::StatusOr<ProcStat>(absl::NotFoundError("unreadable"));
  if (stat.ok()) {
    families.push_back(Family("process_cpu_seconds_total",
                              "Total user and system CPU time spent in "
                              "seconds.",
                              MetricType::Counter, stat->cpu_seconds));
  }
  if (std::optional<double> fds = OpenFds(); fds.has_value()) {
    families.push_back(Family("process_open_fds",
                              "Number of open file descriptors.",
                              MetricType::Gauge, *fds));
  }
  if (text = ReadFile(proc_ + "/self/limits"); text.has_value()) {
    if (absl::StatusOr<double> max = ParseMaxOpenFiles(*text); max.ok()) {
      families.push_back(Family("process_max_fds",
                                "Maximum number of open file descriptors.",
                                MetricType::Gauge, *max));
    }
  }
  if (!stat.ok()) return families;
  families.push_back(Family("process_virtual_memory_bytes",
                            "Virtual memory size in bytes.", MetricType::Gauge,
                            stat->virtual_bytes));
  families.push_back(Family("process_resident_memory_bytes",
                            "Resident memory size in bytes.", MetricType::Gauge,
                            stat->resident_bytes));
  if (text = ReadFile(proc_ + "/stat"); text.has_value()) {
    if (absl::StatusOr<double> boot = ParseBootTime(*text); boot.ok()) {
      families.push_back(
          Family("process_start_time_seconds",
                 "Start time of the process since unix epoch in seconds.",
                 MetricType::Gauge, *boot + stat->start_seconds_after_boot));
    }
  }
  return families;
}

}  // namespace chunkd::metrics
