// The shared parts of chunking_bench (chunking_bench.cc): its own flags,
// the datasets and their reference chunk lists, and the context it reports.
//
// Thread safety: the flags are parsed once in main before any benchmark
// runs; Fixtures is filled from the benchmarks' thread (Google Benchmark runs
// them one at a time).
#ifndef CHUNKD_BENCH_CHUNKING_BENCH_SUPPORT_H_
#define CHUNKD_BENCH_CHUNKING_BENCH_SUPPORT_H_

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "workload/harness.h"

namespace chunkd::bench {

// chunking_bench's flags besides Google Benchmark's (the list is in
// chunking_bench.cc). Defaults: threads 1 and 2, kDefaultBenchSize bytes per
// dataset, both datasets, every strategy.
struct Flags {
  std::vector<size_t> threads = {1, 2};
  size_t size = workload::kDefaultBenchSize;
  std::vector<workload::Dataset> datasets = {workload::Dataset::kRandom,
                                             workload::Dataset::kVersioned};
  std::vector<chunking::Strategy> strategies = {
      chunking::Strategy::kAuto, chunking::Strategy::kTwoStage,
      chunking::Strategy::kSequentialScan, chunking::Strategy::kReference};
};

// The flags of this run.
Flags& GetFlags();

// Parses "--name=value" flags of our own out of argv, leaving the rest for
// Google Benchmark. Returns false (after printing why) on a bad value.
bool ParseOwnFlags(int* argc, char** argv);

// The datasets and their reference chunk lists, built on first use (outside
// any timed loop) and kept for the whole run.
class Fixtures {
 public:
  static const std::vector<uint8_t>& Data(workload::Dataset dataset) {
    auto& slot = Instance().data_[dataset];
    if (slot == nullptr) {
      slot = std::make_unique<std::vector<uint8_t>>(
          workload::MakeDataset(dataset, GetFlags().size));
    }
    return *slot;
  }

  static const std::vector<chunking::Chunk>& Reference(chunking::Algorithm algorithm,
                                             workload::Dataset dataset) {
    auto& slot = Instance().reference_[{algorithm, dataset}];
    if (slot == nullptr) {
      slot = std::make_unique<std::vector<chunking::Chunk>>(chunking::ReferenceChunks(
          workload::BenchOptions(algorithm), Data(dataset)));
    }
    return *slot;
  }

 private:
  static Fixtures& Instance() {
    static Fixtures* fixtures = new Fixtures();
    return *fixtures;
  }

  std::map<workload::Dataset, std::unique_ptr<std::vector<uint8_t>>> data_;
  std::map<std::pair<chunking::Algorithm, workload::Dataset>,
           std::unique_ptr<std::vector<chunking::Chunk>>>
      reference_;
};

// An executor of `threads` threads, or null for one (the calling thread).
std::unique_ptr<chunking::Executor> MakeExecutor(size_t threads);

// Sets the bytes processed and the chunk counters of a chunking run.
void Finish(benchmark::State& state, size_t bytes, size_t chunks);

// The run's context: the kernel sets this CPU supports, the best one, the
// bytes per dataset and the seed.
void AddContext();

}  // namespace chunkd::bench

#endif  // CHUNKD_BENCH_CHUNKING_BENCH_SUPPORT_H_
