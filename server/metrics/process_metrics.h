// The process_* metrics of the Prometheus client libraries' process
// collectors (client_golang, client_python), which prometheus-cpp 1.0.1 lacks:
// same names, types, help texts and meaning, so that dashboards and alerts
// written for any Prometheus-instrumented process work on chunkd
// (docs/operations.md, "Metrics"). Read from /proc at every scrape:
//
//   process_cpu_seconds_total      counter: user + system CPU time, seconds
//   process_open_fds               gauge: open file descriptors
//   process_max_fds                gauge: their soft limit (RLIMIT_NOFILE)
//   process_virtual_memory_bytes   gauge: virtual memory size
//   process_resident_memory_bytes  gauge: resident set size
//   process_start_time_seconds     gauge: start time, seconds since the epoch
//
// A family whose /proc file cannot be read or parsed is left out of that
// scrape (as client_python does); the others are still reported.
#ifndef CHUNKD_METRICS_PROCESS_METRICS_H_
#define CHUNKD_METRICS_PROCESS_METRICS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace chunkd::metrics {

// What /proc/<pid>/stat says of a process, in the metrics' units.
struct ProcStat {
  double cpu_seconds = 0;     // utime + stime
  double virtual_bytes = 0;   // vsize
  double resident_bytes = 0;  // rss pages x page size
  // starttime: seconds after boot; add the boot time for the epoch's.
  double start_seconds_after_boot = 0;
};

// Parses the text of /proc/<pid>/stat, given the clock ticks per second
// (sysconf(_SC_CLK_TCK)) and the page size. The command name may hold
// spaces and parentheses: fields are counted from its last ')'.
// INVALID_ARGUMENT naming the problem when the text is not such a line.
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text,
                                       long ticks_per_second, long page_size);

// The boot time (the "btime" line of /proc/stat), seconds since the epoch.
absl::StatusOr<double> ParseBootTime(absl::string_view proc_stat);

// The soft limit of the "Max open files" line of /proc/<pid>/limits;
// +Inf when it says "unlimited".
absl::StatusOr<double> ParseMaxOpenFiles(absl::string_view limits);

// The process_* families of this process, as a prometheus-cpp Collectable
// (register it with the Exposer beside the registry).
//
// Thread safety: thread-safe (Collect only reads files).
class ProcessCollector final : public prometheus::Collectable {
 public:
  // `proc` is the root of the proc file system; the process is `proc`/self.
  // Tests point it at a directory of fixed files.
  explicit ProcessCollector(std::string proc = "/proc");

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // Entries of `proc_`/self/fd; nullopt when it cannot be listed.
  std::optional<double> OpenFds() const;

  const std::string proc_;
  const long ticks_per_second_;
  const long page_size_;
};

}  // namespace chunkd::metrics

#endif  // CHUNKD_METRICS_PROCESS_METRICS_H_
