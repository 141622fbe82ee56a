// BestRateReporter: Google Benchmark's console output, plus each benchmark's
// best bytes_per_second over its repetitions, from which a benchmark prints
// its table of ratios (side by side in one run, docs/benchmarks.md, "How we measure") in
// Finalize().
//
// Thread safety: used by the benchmark runner on one thread.
#ifndef CHUNKD_BENCH_BEST_RATE_REPORTER_H_
#define CHUNKD_BENCH_BEST_RATE_REPORTER_H_

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace chunkd::bench {

class BestRateReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      double& best = best_[run.run_name.function_name];
      best = std::max(best, static_cast<double>(it->second));
    }
    ConsoleReporter::ReportRuns(runs);
  }

 protected:
  // The best bytes per second of the benchmark `name` (0: it did not run).
  double Best(const std::string& name) const {
    auto it = best_.find(name);
    return it == best_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> best_;
};

}  // namespace chunkd::bench

#endif  // CHUNKD_BENCH_BEST_RATE_REPORTER_H_
