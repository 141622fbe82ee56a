// `chunkctl bench`: the chunking benchmark of `make bench`, interactively.
//
// For each algorithm (with the parameters of the chunking targets,
// workload::BenchOptions: its defaults, those of the upstream Go module where
// it matches one) it times the scalar reference,
// ReferenceChunks, then FastChunks with every selected kernel on every selected
// thread count, over the same in-memory dataset (server/bench/harness.h), and
// prints one row per measurement as soon as it is done: GB/s, the ratio to the
// reference, the fraction of the memory-read ceiling on as many threads, and
// whether the chunk list equals the reference's. A row that differs says where,
// and makes the command fail: a fast wrong kernel never passes for a result.
//
// Thread safety: RunBench uses its own thread pools; one call at a time per
// output stream.
#ifndef CHUNKD_CLIENTS_CLI_BENCH_H_
#define CHUNKD_CLIENTS_CLI_BENCH_H_

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/args.h"
#include "workload/harness.h"

namespace chunkd::cli {

// Bounds of the command's values.
inline constexpr uint64_t kMaxBenchSize = uint64_t{1} << 32;  // 4 GiB
inline constexpr size_t kMaxBenchThreads = 256;
inline constexpr double kMaxBenchSeconds = 3600;

// What to measure, parsed from the command line.
struct BenchConfig {
  // --algorithm A|all. Default all.
  std::vector<chunking::Algorithm> algorithms;
  // --preset NAME (chunking::Preset): time that preset's algorithm, alone,
  // with its parameters instead of the benchmark's (workload::BenchOptions),
  // so that other parameter sets can be compared with another program on the
  // same bytes (server/bench/crate_bench.py). --algorithm, if given, must
  // name the preset's algorithm. Unset: the benchmark's parameters.
  std::optional<std::string> preset;
  std::optional<chunking::ChunkerOptions> preset_options;
  // --backend B|all: the kernels to time. Default all this CPU supports; a
  // kernel named explicitly must be supported. "auto" is not a kernel here
  // but auto_kernel below.
  std::vector<const chunking::kernels::KernelSet*> kernels;
  // --backend auto (and all): a row per thread count for the engine's
  // default kernel — CHUNKD_BACKEND's when set, else the automatic one
  // (chunking/auto_kernel.h) — with its ratio to the fastest of `kernels`.
  bool auto_kernel = false;
  // Kernels left out of "all" because this CPU cannot run them, with why.
  std::vector<std::string> skipped;
  // --threads N,...: each thread count of the fast paths. Default 1 and the
  // number of cores, when more than one.
  std::vector<size_t> threads;
  // --strategy: the engine's strategy. Default auto.
  chunking::Strategy strategy = chunking::Strategy::kAuto;
  // --dataset random|versioned. Default random.
  workload::Dataset dataset = workload::Dataset::kRandom;
  // --size BYTES. Default 64 MiB.
  size_t size = workload::kDefaultBenchSize;
  // --input FILE: time FILE's bytes (read into memory, at most kMaxBenchSize)
  // instead of a generated dataset, so that another program can be timed on
  // the same bytes (server/bench/upstream_bench.py). Empty: generate. Not
  // with --dataset or --size.
  std::string input;
  // --seconds S: how long each measurement repeats; the fastest run counts.
  // At least one run. Default 1.
  double seconds = 1.0;
};

// The flags of `chunkctl bench`.
std::vector<FlagSpec> BenchFlagSpecs();

// Reads the flags of BenchFlagSpecs() from `args`. INVALID_ARGUMENT names the
// flag and what it accepts; for --backend, the error of
// kernels::FindKernelSet() (unknown, or unsupported by this CPU).
absl::StatusOr<BenchConfig> BenchConfigFromArgs(const ParsedArgs& args);

// Runs the measurements and prints the table to `out` as it goes. OK when
// every fast path's chunks equal the reference's; INTERNAL naming the
// mismatching rows otherwise (after printing every row); UNAVAILABLE when
// writing fails; the engine's error if it rejects a configuration; the
// error of reading --input (naming the file), or INVALID_ARGUMENT when it
// is empty or larger than kMaxBenchSize.
absl::Status RunBench(const BenchConfig& config, std::FILE* out);

}  // namespace chunkd::cli

#endif  // CHUNKD_CLIENTS_CLI_BENCH_H_
