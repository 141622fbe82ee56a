// The shared parts of chunking_bench: chunking_bench_support.h.

#include "bench/chunking_bench_support.h"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "workload/harness.h"

namespace chunkd::bench {

using chunking::Strategy;

Flags& GetFlags() {
  static Flags flags;
  return flags;
}

std::unique_ptr<chunking::Executor> MakeExecutor(size_t threads) {
  if (threads <= 1) return nullptr;
  return std::make_unique<chunking::ThreadPoolExecutor>(threads);
}

void Finish(benchmark::State& state, size_t bytes, size_t chunks) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes));
  state.counters["chunks"] = static_cast<double>(chunks);
  state.counters["avg_chunk"] =
      chunks == 0 ? 0.0 : static_cast<double>(bytes) / chunks;
}

// Parses "--name=value" flags of our own out of argv, leaving the rest for
// Google Benchmark. Returns false (after printing why) on a bad value.
bool ParseOwnFlags(int* argc, char** argv) {
  Flags& flags = GetFlags();
  int kept = 1;
  bool ok = true;
  for (int i = 1; i < *argc; ++i) {
    const absl::string_view arg = argv[i];
    auto value_of = [&](absl::string_view name, absl::string_view* value) {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (!absl::StartsWith(arg, prefix)) return false;
      *value = arg.substr(prefix.size());
      return true;
    };
    absl::string_view value;
    if (value_of("threads", &value)) {
      flags.threads.clear();
      for (absl::string_view word : absl::StrSplit(value, ',')) {
        size_t n = 0;
        if (!absl::SimpleAtoi(word, &n) || n == 0 || n > 1024) {
          std::fprintf(stderr, "--threads: bad thread count \"%s\"\n",
                       std::string(word).c_str());
          ok = false;
        }
        flags.threads.push_back(n);
      }
    } else if (value_of("size", &value)) {
      if (!absl::SimpleAtoi(value, &flags.size) || flags.size == 0) {
        std::fprintf(stderr, "--size: expected a positive byte count\n");
        ok = false;
      }
    } else if (value_of("datasets", &value)) {
      flags.datasets.clear();
      for (absl::string_view word : absl::StrSplit(value, ',')) {
        absl::StatusOr<workload::Dataset> d = workload::ParseDataset(word);
        if (!d.ok()) {
          std::fprintf(stderr, "--datasets: %s\n",
                       std::string(d.status().message()).c_str());
          ok = false;
        } else {
          flags.datasets.push_back(*d);
        }
      }
    } else if (value_of("strategies", &value)) {
      flags.strategies.clear();
      for (absl::string_view word : absl::StrSplit(value, ',')) {
        absl::StatusOr<Strategy> s = chunking::ParseStrategy(word);
        if (!s.ok()) {
          std::fprintf(stderr, "--strategies: %s\n",
                       std::string(s.status().message()).c_str());
          ok = false;
        } else {
          flags.strategies.push_back(*s);
        }
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  argv[kept] = nullptr;
  return ok;
}

void AddContext() {
  std::vector<std::string> supported;
  for (const chunking::kernels::KernelSet* kernel :
       chunking::kernels::AllKernelSets()) {
    if (kernel->supported()) supported.push_back(kernel->name);
  }
  benchmark::AddCustomContext("chunkd_kernels_supported",
                              absl::StrJoin(supported, ","));
  benchmark::AddCustomContext("chunkd_best_kernel",
                              chunking::kernels::BestKernelSet().name);
  benchmark::AddCustomContext("chunkd_bytes_per_dataset",
                              absl::StrCat(GetFlags().size));
  benchmark::AddCustomContext("chunkd_seed",
                              absl::StrCat(workload::kBenchSeed));
}

}  // namespace chunkd::bench
