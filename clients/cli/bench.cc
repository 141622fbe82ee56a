#include "clients/cli/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "clients/cli/input_file.h"
#include "workload/harness.h"

namespace chunkd::cli {
namespace {

using chunking::Algorithm;
using chunking::Chunk;
using chunking::kernels::KernelSet;

std::vector<std::string> SplitList(absl::string_view text) {
  return absl::StrSplit(text, ',');
}

// "12%" of the ceiling; "-" without one.
std::string OfCeiling(double gbps, double ceiling) {
  return ceiling > 0 ? absl::StrFormat("%.0f%%", 100 * gbps / ceiling) : "-";
}

absl::StatusOr<std::vector<Algorithm>> ParseAlgorithms(absl::string_view text) {
  if (text == "all") return chunking::AllAlgorithms();
  std::vector<Algorithm> algorithms;
  for (const std::string& word : SplitList(text)) {
    absl::StatusOr<Algorithm> algorithm = chunking::ParseAlgorithm(word);
    if (!algorithm.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--algorithm: ", algorithm.status().message(), ", or all"));
    }
    if (std::find(algorithms.begin(), algorithms.end(), *algorithm) ==
        algorithms.end()) {
      algorithms.push_back(*algorithm);
    }
  }
  return algorithms;
}

absl::Status ParseBackends(absl::string_view text, BenchConfig* config) {
  if (text == "all") {
    config->auto_kernel = true;
    for (const KernelSet* kernel : chunking::kernels::AllKernelSets()) {
      if (kernel->supported()) {
        config->kernels.push_back(kernel);
      } else {
        config->skipped.push_back(
            absl::StrCat(kernel->name, " (not supported by this CPU or OS)"));
      }
    }
    return absl::OkStatus();
  }
  for (const std::string& word : SplitList(text)) {
    if (word == "auto") {
      config->auto_kernel = true;
      continue;
    }
    absl::StatusOr<const KernelSet*> kernel = chunking::kernels::FindKernelSet(word);
    if (!kernel.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--backend: ", kernel.status().message(), ", or auto, or all"));
    }
    if (std::find(config->kernels.begin(), config->kernels.end(), *kernel) ==
        config->kernels.end()) {
      config->kernels.push_back(*kernel);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<size_t>> ParseThreads(absl::string_view text) {
  std::vector<size_t> threads;
  for (const std::string& word : SplitList(text)) {
    absl::StatusOr<uint64_t> n = ParseUint("threads", word, kMaxBenchThreads);
    if (!n.ok() || *n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--threads: expected thread counts in 1..", kMaxBenchThreads,
          " separated by commas, got \"", text, "\""));
    }
    if (std::find(threads.begin(), threads.end(), *n) == threads.end()) {
      threads.push_back(static_cast<size_t>(*n));
    }
  }
  return threads;
}

absl::StatusOr<double> ParseSeconds(absl::string_view text) {
  double seconds = 0;
  const bool plain =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return absl::ascii_isdigit(c) || c == '.';
      });
  if (!plain || !absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > kMaxBenchSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seconds: expected a number of seconds in (0, ",
                     kMaxBenchSeconds, "], got \"", text, "\""));
  }
  return seconds;
}

std::vector<size_t> DefaultThreads() {
  const size_t cores = std::thread::hardware_concurrency();
  if (cores <= 1) return {1};
  return {1, std::min(cores, kMaxBenchThreads)};
}

// The fastest of repeated runs of `run` within `seconds` (at least one run),
// in seconds. `run` returns false to stop early.
double TimeBest(double seconds, absl::FunctionRef<bool()> run) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  double best = 0;
  bool first = true;
  do {
    const Clock::time_point start = Clock::now();
    const bool go_on = run();
    const double elapsed =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (first || elapsed < best) best = elapsed;
    first = false;
    if (!go_on) break;
  } while (Clock::now() < deadline);
  return best;
}

double GigabytesPerSecond(size_t bytes, double seconds) {
  return seconds <= 0 ? 0.0 : static_cast<double>(bytes) / seconds / 1e9;
}

std::string ThreadsLabel(size_t n) {
  return absl::StrCat(n, n == 1 ? " thread" : " threads");
}

constexpr absl::string_view kRowFormat =
    "%-9s  %-9s  %7s  %-10s  %7s  %7s  %10s  %7s  %s\n";

}  // namespace

std::vector<FlagSpec> BenchFlagSpecs() {
  return {{"algorithm"}, {"preset"}, {"backend"}, {"threads"}, {"strategy"},
          {"dataset"},   {"size"},   {"seconds"}, {"input"},   {"help", false}};
}

namespace {

// --preset: the preset's parameters, and its algorithm as the only one;
// an --algorithm given alongside must be that one.
absl::Status ApplyPreset(const ParsedArgs& args, BenchConfig* config) {
  const std::optional<std::string> name = args.Get("preset");
  if (!name) return absl::OkStatus();
  absl::StatusOr<chunking::ChunkerOptions> options = chunking::Preset(*name);
  if (!options.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preset: ", options.status().message()));
  }
  const std::vector<Algorithm> only = {options->algorithm};
  if (args.Has("algorithm") && config->algorithms != only) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--preset ", *name, " is ", chunking::AlgorithmName(only[0]),
        ": --algorithm must be that one or left out"));
  }
  config->algorithms = only;
  config->preset = *name;
  config->preset_options = *options;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchConfig> BenchConfigFromArgs(const ParsedArgs& args) {
  BenchConfig config;
  absl::StatusOr<std::vector<Algorithm>> algorithms =
      ParseAlgorithms(args.Get("algorithm").value_or("all"));
  if (!algorithms.ok()) return algorithms.status();
  config.algorithms = *std::move(algorithms);
  if (absl::Status s = ApplyPreset(args, &config); !s.ok()) return s;
  if (absl::Status s =
          ParseBackends(args.Get("backend").value_or("all"), &config);
      !s.ok()) {
    return s;
  }
  if (std::optional<std::string> text = args.Get("threads")) {
    absl::StatusOr<std::vector<size_t>> threads = ParseThreads(*text);
    if (!threads.ok()) return threads.status();
    config.threads = *std::move(threads);
  } else {
    config.threads = DefaultThreads();
  }
  if (absl::Status s = ParseFlag(args, "strategy", chunking::ParseStrategy,
                                 &config.strategy);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ParseFlag(args, "dataset", workload::ParseDataset, &config.dataset);
      !s.ok()) {
    return s;
  }
  if (std::optional<std::string> text = args.Get("size")) {
    absl::StatusOr<uint64_t> size = ParseUint("size", *text, kMaxBenchSize);
    if (!size.ok() || *size == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--size: expected a byte count in 1..", kMaxBenchSize,
                       ", got \"", *text, "\""));
    }
    config.size = static_cast<size_t>(*size);
  }
  if (std::optional<std::string> text = args.Get("seconds")) {
    absl::StatusOr<double> seconds = ParseSeconds(*text);
    if (!seconds.ok()) return seconds.status();
    config.seconds = *seconds;
  }
  if (std::optional<std::string> input = args.Get("input")) {
    // The file's bytes replace the generated data: a dataset or size given
    // alongside would be silently ignored.
    if (input->empty() || args.Has("dataset") || args.Has("size")) {
      return absl::InvalidArgumentError(
          "--input: expected a file name, and neither --dataset nor --size");
    }
    config.input = *input;
  }
  return config;
}

namespace {

// The whole of the file `name`, at most kMaxBenchSize bytes.
absl::StatusOr<std::vector<uint8_t>> ReadInput(const std::string& name) {
  absl::StatusOr<std::unique_ptr<InputFile>> file = InputFile::Open(name);
  if (!file.ok()) return file.status();
  std::vector<uint8_t> data;
  data.reserve(std::min<uint64_t>((*file)->size(), kMaxBenchSize));
  constexpr size_t kPiece = size_t{1} << 20;
  for (;;) {
    const size_t at = data.size();
    // One byte past the bound is enough to tell that the file exceeds it.
    const size_t want = std::min<uint64_t>(kPiece, kMaxBenchSize + 1 - at);
    data.resize(at + want);
    absl::StatusOr<size_t> n =
        (*file)->Read(reinterpret_cast<char*>(data.data() + at), want);
    if (!n.ok()) return n.status();
    data.resize(at + *n);
    if (*n == 0) break;
    if (data.size() > kMaxBenchSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input: ", name, " is larger than ", kMaxBenchSize, " bytes"));
    }
  }
  if (data.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input: ", name, " is empty"));
  }
  return data;
}

// One `chunkctl bench` run: the header, the memory-read ceilings, then a
// row for the reference and for every backend x thread count, per
// algorithm.
class BenchRun {
 public:
  BenchRun(const BenchConfig& config, std::FILE* out)
      : config_(config), out_(out) {}

  absl::Status Run();

 private:
  void Print(const std::string& text);
  void PrintHeader();
  void MakeExecutors();
  chunking::Executor* ExecutorFor(size_t n) const;
  void MeasureCeilings();
  absl::Status RunAlgorithm(Algorithm algorithm);
  absl::Status RunEngine(const chunking::ChunkerOptions& options,
                         const std::string& alg, const std::vector<Chunk>& want,
                         double ref_gbps, const KernelSet* kernel, size_t n);
  // The auto row's verdict after "ok": its kernel, and its speed as a
  // ratio to the fastest explicit kernel's on as many threads.
  std::string AutoVerdict(const std::string& kernel, double gbps,
                          size_t n) const;

  const BenchConfig& config_;
  std::FILE* const out_;
  bool write_ok_ = true;
  std::vector<uint8_t> data_;
  // One pool per thread count, shared by every algorithm; 1: no pool.
  std::map<size_t, std::unique_ptr<chunking::Executor>> executors_;
  std::map<size_t, double> ceiling_;  // GB/s
  std::vector<std::string> mismatches_;
  // The current algorithm's fastest explicit kernel per thread count: GB/s
  // and its name.
  std::map<size_t, std::pair<double, std::string>> best_;
};

absl::Status BenchRun::Run() {
  if (config_.input.empty()) {
    data_ = workload::MakeDataset(config_.dataset, config_.size);
  } else {
    absl::StatusOr<std::vector<uint8_t>> data = ReadInput(config_.input);
    if (!data.ok()) return data.status();
    data_ = *std::move(data);
  }
  PrintHeader();
  MakeExecutors();
  MeasureCeilings();
  Print(absl::StrFormat(kRowFormat, "algorithm", "backend", "threads",
                        "strategy", "GB/s", "x ref", "of ceiling", "chunks",
                        "check"));
  for (Algorithm algorithm : config_.algorithms) {
    if (absl::Status s = RunAlgorithm(algorithm); !s.ok()) return s;
  }
  if (!write_ok_) return absl::UnavailableError("writing output failed");
  if (!mismatches_.empty()) {
    return absl::InternalError(
        absl::StrCat("chunks differ from the reference: ",
                     absl::StrJoin(mismatches_, "; ")));
  }
  return absl::OkStatus();
}

void BenchRun::Print(const std::string& text) {
  write_ok_ = write_ok_ && std::fputs(text.c_str(), out_) >= 0 &&
              std::fflush(out_) == 0;
}

void BenchRun::PrintHeader() {
  std::vector<std::string> names;
  for (const KernelSet* kernel : config_.kernels) names.push_back(kernel->name);
  if (config_.auto_kernel) names.push_back("auto");
  const std::string what =
      config_.input.empty()
          ? absl::StrFormat("%s data (seed %d)",
                            workload::DatasetName(config_.dataset),
                            workload::kBenchSeed)
          : absl::StrCat("the file ", config_.input);
  Print(absl::StrFormat(
      "chunkctl bench: %d bytes of %s; backends %s; strategy %s%s\n",
      data_.size(), what, names.empty() ? "none" : absl::StrJoin(names, ", "),
      chunking::StrategyName(config_.strategy),
      config_.preset ? absl::StrCat("; preset ", *config_.preset) : ""));
  if (!config_.skipped.empty()) {
    Print(
        absl::StrCat("skipped: ", absl::StrJoin(config_.skipped, ", "), "\n"));
  }
}

void BenchRun::MakeExecutors() {
  for (size_t n : config_.threads) {
    if (n > 1)
      executors_[n] = std::make_unique<chunking::ThreadPoolExecutor>(n);
  }
}

chunking::Executor* BenchRun::ExecutorFor(size_t n) const {
  auto it = executors_.find(n);
  return it == executors_.end() ? nullptr : it->second.get();
}

// The memory-read ceiling on every thread count the table uses.
void BenchRun::MeasureCeilings() {
  std::vector<size_t> ceiling_threads = config_.threads;
  if (std::find(ceiling_threads.begin(), ceiling_threads.end(), 1) ==
      ceiling_threads.end()) {
    ceiling_threads.insert(ceiling_threads.begin(), 1);
  }
  volatile uint64_t sink = 0;  // keeps the sums from being optimized away
  std::vector<std::string> ceiling_text;
  for (size_t n : ceiling_threads) {
    const double best = TimeBest(config_.seconds, [&] {
      sink = workload::SumWordsParallel(ExecutorFor(n), data_.data(),
                                        data_.size());
      return true;
    });
    ceiling_[n] = GigabytesPerSecond(data_.size(), best);
    ceiling_text.push_back(
        absl::StrFormat("%s %.2f GB/s", ThreadsLabel(n), ceiling_[n]));
  }
  Print(absl::StrCat("memory read (sum of 64-bit words): ",
                     absl::StrJoin(ceiling_text, ", "), "\n\n"));
}

// The reference's row, then every backend x thread count's.
absl::Status BenchRun::RunAlgorithm(Algorithm algorithm) {
  const chunking::ChunkerOptions options =
      config_.preset_options ? *config_.preset_options
                             : workload::BenchOptions(algorithm);
  const std::string alg(chunking::AlgorithmName(algorithm));
  std::vector<Chunk> want;
  const double ref_seconds = TimeBest(config_.seconds, [&] {
    want = chunking::ReferenceChunks(options, data_);
    return true;
  });
  const double ref_gbps = GigabytesPerSecond(data_.size(), ref_seconds);
  Print(absl::StrFormat(kRowFormat, alg, "reference", "1", "reference",
                        absl::StrFormat("%.2f", ref_gbps), "1.00x",
                        OfCeiling(ref_gbps, ceiling_[1]),
                        absl::StrCat(want.size()), "(the reference)"));
  best_.clear();
  for (const KernelSet* kernel : config_.kernels) {
    for (size_t n : config_.threads) {
      absl::Status s = RunEngine(options, alg, want, ref_gbps, kernel, n);
      if (!s.ok()) return s;
    }
  }
  if (!config_.auto_kernel) return absl::OkStatus();
  for (size_t n : config_.threads) {
    absl::Status s = RunEngine(options, alg, want, ref_gbps, nullptr, n);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The engine with `kernel` (null: the automatic one) on `n` threads, checked
// against `want`.
absl::Status BenchRun::RunEngine(const chunking::ChunkerOptions& options,
                                 const std::string& alg,
                                 const std::vector<Chunk>& want,
                                 double ref_gbps, const KernelSet* kernel,
                                 size_t n) {
  chunking::EngineOptions engine;
  engine.kernel = kernel;
  engine.executor = ExecutorFor(n);
  engine.strategy = config_.strategy;
  absl::StatusOr<chunking::EnginePlan> plan =
      chunking::PlanEngine(options, engine);
  // Resolving the plan has run the automatic kernel's calibration, if any,
  // before the timing.
  if (!plan.ok()) return plan.status();
  absl::Status check;
  absl::Status failure;
  const double best = TimeBest(config_.seconds, [&] {
    absl::StatusOr<std::vector<Chunk>> got =
        chunking::FastChunks(options, data_, engine);
    if (!got.ok()) {
      failure = got.status();
      return false;
    }
    check = workload::CompareChunks(want, *got);
    return check.ok();
  });
  if (!failure.ok()) return failure;
  const double gbps = GigabytesPerSecond(data_.size(), best);
  const std::string name = kernel == nullptr ? "auto" : kernel->name;
  std::string verdict = "ok";
  if (!check.ok()) {
    verdict = absl::StrCat("MISMATCH: ", check.message());
    mismatches_.push_back(absl::StrCat(alg, " ", name, " ", ThreadsLabel(n),
                                       ": ", check.message()));
  } else if (kernel == nullptr) {
    absl::StrAppend(&verdict, AutoVerdict(plan->kernel, gbps, n));
  } else if (gbps > best_[n].first) {
    best_[n] = {gbps, kernel->name};
  }
  Print(absl::StrFormat(
      kRowFormat, alg, name, absl::StrCat(n),
      chunking::StrategyName(plan->strategy), absl::StrFormat("%.2f", gbps),
      absl::StrFormat("%.2fx", ref_gbps > 0 ? gbps / ref_gbps : 0.0),
      OfCeiling(gbps, ceiling_[n]), absl::StrCat(want.size()), verdict));
  return absl::OkStatus();
}

std::string BenchRun::AutoVerdict(const std::string& kernel, double gbps,
                                  size_t n) const {
  auto it = best_.find(n);
  if (it == best_.end() || it->second.first <= 0) {
    return absl::StrCat("; auto = ", kernel);
  }
  return absl::StrFormat("; auto = %s, %.2fx the best (%s)", kernel,
                         gbps / it->second.first, it->second.second);
}

}  // namespace

absl::Status RunBench(const BenchConfig& config, std::FILE* out) {
  return BenchRun(config, out).Run();
}

}  // namespace chunkd::cli
