// Timing of a StreamPipeline's stages: where a stream's time goes, per stage
// (chunkd_stage_seconds_total{stage}: chunk, fingerprint, index), and the
// chunk stage's share in StreamTotals::chunk_seconds.
//
// StageCounter picks one stage's counter; Stopwatch times one stretch of
// work; Laps splits a stretch between stages with one clock read per switch
// (the hint follower switches between stages at every chunk).
//
// Thread safety: a Stopwatch or Laps belongs to one thread; the counters are
// thread-safe.
#ifndef CHUNKD_PIPELINE_STAGE_CLOCK_H_
#define CHUNKD_PIPELINE_STAGE_CLOCK_H_

#include <chrono>

#include "metrics/metrics.h"

namespace chunkd::pipeline {

// The counter of one stage, or null when stages are not measured (`stages`
// null).
inline prometheus::Counter* StageCounter(
    const metrics::StageCounters* stages,
    prometheus::Counter* metrics::StageCounters::*stage) {
  return stages == nullptr ? nullptr : stages->*stage;
}

// Adds the seconds from construction to destruction to *total and to
// `counter`, each when not null.
class Stopwatch {
 public:
  Stopwatch(double* total, prometheus::Counter* counter)
      : total_(total),
        counter_(counter),
        start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
            .count();
    if (total_ != nullptr) *total_ += seconds;
    if (counter_ != nullptr) counter_->Increment(seconds);
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double* total_;
  prometheus::Counter* counter_;
  std::chrono::steady_clock::time_point start_;
};

// Each Lap() adds the time since the one before (or since construction) to
// *total and to `counter`, each when not null.
class Laps {
 public:
  Laps() : last_(std::chrono::steady_clock::now()) {}
  void Lap(double* total, prometheus::Counter* counter) {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    if (total != nullptr) *total += seconds;
    if (counter != nullptr) counter->Increment(seconds);
  }

 private:
  std::chrono::steady_clock::time_point last_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_STAGE_CLOCK_H_
