// The automatic kernel's calibration and its process-wide table.

#include "chunking/auto_kernel.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/drivers/driver.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"

namespace chunkd::chunking {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::KernelSet;

size_t ThreadsOf(const Executor* executor) {
  return executor == nullptr ? 1 : std::max<size_t>(1, executor->parallelism());
}

// The supported kernels, narrowest first (AllKernelSets() lists them best
// first).
std::vector<const KernelSet*> Candidates() {
  std::vector<const KernelSet*> out;
  absl::Span<const KernelSet* const> all = kernels::AllKernelSets();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if ((*it)->supported()) out.push_back(*it);
  }
  return out;
}

// The candidates' timings, each with its automatic strategy and the
// narrowest kernel that runs the same code: with a strategy that uses no
// kernel (fixed has no stage 1; the reference strategy is the cutter
// alone), every such kernel runs the same code.
std::vector<KernelTiming> PlanTimings(const ChunkerOptions& options,
                                      Executor* executor) {
  const bool has_stage1 = NewDriver(options)->two_stage() != nullptr;
  auto kernel_free = [has_stage1](const KernelTiming& t) {
    return !has_stage1 || t.strategy == Strategy::kReference;
  };
  std::vector<KernelTiming> timings;
  for (const KernelSet* kernel : Candidates()) {
    EngineOptions engine;
    engine.kernel = kernel;
    engine.executor = executor;
    absl::StatusOr<EnginePlan> plan = PlanEngine(options, engine);
    if (!plan.ok()) continue;  // unreachable: default options, supported
    KernelTiming t;
    t.kernel = kernel;
    t.strategy = plan->strategy;
    t.same_as = kernel;
    if (kernel_free(t)) {
      for (const KernelTiming& earlier : timings) {
        if (kernel_free(earlier)) {
          t.same_as = earlier.kernel;
          break;
        }
      }
    }
    timings.push_back(t);
  }
  return timings;
}

// Marks the timings that run their own code and are slower than
// kCalibrationDropFactor times the fastest as dropped.
void DropSlow(std::vector<KernelTiming>* timings) {
  double fastest = 0;
  for (const KernelTiming& t : *timings) {
    if (t.same_as != t.kernel || t.runs == 0) continue;
    if (fastest == 0 || t.best_seconds < fastest) fastest = t.best_seconds;
  }
  for (KernelTiming& t : *timings) {
    if (t.same_as == t.kernel && t.runs > 0 &&
        t.best_seconds > kCalibrationDropFactor * fastest) {
      t.dropped = true;
    }
  }
}

// Interleaved rounds of one run per timing that runs its own code, until
// kCalibrationMaxRounds or until the next run might pass `budget`: the time
// used plus the run's expected time, its kernel's fastest run so far (a
// first run, cold, is often slower; a kernel not run yet is expected to
// take nothing, so that the slowest candidate's first run does not keep
// the others from theirs); after two rounds without the dropped ones
// (DropSlow). Returns false when the budget did not allow one run of each.
bool TimeRounds(const ChunkerOptions& options, Executor* executor,
                absl::Span<const uint8_t> data, Clock::time_point start,
                absl::Duration budget, std::vector<KernelTiming>* timings,
                Clock::duration* longest_run) {
  const Clock::duration limit = std::chrono::duration_cast<Clock::duration>(
      absl::ToChronoNanoseconds(std::max(budget, absl::ZeroDuration())));
  Clock::duration& longest = *longest_run;  // reported: the overrun bound
  longest = Clock::duration::zero();
  for (int round = 0; round < kCalibrationMaxRounds; ++round) {
    for (KernelTiming& t : *timings) {
      if (t.same_as != t.kernel || t.dropped) continue;
      const Clock::duration expected =
          t.runs == 0 ? Clock::duration::zero()
                      : std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(t.best_seconds));
      const Clock::time_point now = Clock::now();
      if (now - start + expected >= limit) return round > 0;
      EngineOptions engine;
      engine.kernel = t.kernel;
      engine.executor = executor;
      absl::StatusOr<std::vector<Chunk>> chunks =
          FastChunks(options, data, engine);
      const Clock::duration took = Clock::now() - now;
      longest = std::max(longest, took);
      if (!chunks.ok()) continue;  // unreachable, as in PlanTimings
      const double seconds = std::chrono::duration<double>(took).count();
      if (t.runs == 0 || seconds < t.best_seconds) t.best_seconds = seconds;
      ++t.runs;
    }
    if (round == 1) DropSlow(timings);
  }
  return true;
}

// The narrowest kernel within kCalibrationMargin of the fastest.
const KernelSet* Choose(const std::vector<KernelTiming>& timings) {
  double fastest = 0;
  for (const KernelTiming& t : timings) {
    if (fastest == 0 || t.best_seconds < fastest) fastest = t.best_seconds;
  }
  for (const KernelTiming& t : timings) {
    if (t.best_seconds <= fastest * (1 + kCalibrationMargin)) return t.kernel;
  }
  return &kernels::BestKernelSet();  // unreachable: the fastest qualifies
}

// The process-wide table of choices, by algorithm and thread count. The
// mutex is held during a calibration, so that two calibrations never run at
// once and disturb each other's timings.
struct Table {
  std::mutex mu;
  std::map<std::pair<Algorithm, size_t>, KernelChoice> choices;
};

Table& GlobalTable() {
  static Table* const table = new Table;  // never destroyed: no exit order
  return *table;
}

}  // namespace

std::vector<uint8_t> CalibrationData(size_t size) {
  // splitmix64: cheap, and every byte value equally likely.
  std::vector<uint8_t> data(size);
  uint64_t state = kCalibrationSeed;
  for (size_t i = 0; i < size; i += 8) {
    state += 0x9e3779b97f4a7c15;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    z ^= z >> 31;
    std::memcpy(&data[i], &z, std::min<size_t>(8, size - i));
  }
  return data;
}

KernelChoice CalibrateKernel(Algorithm algorithm, Executor* executor,
                             absl::Duration budget,
                             absl::Span<const uint8_t> data) {
  const Clock::time_point start = Clock::now();
  const ChunkerOptions options = DefaultOptions(algorithm);
  KernelChoice choice;
  choice.algorithm = algorithm;
  choice.threads = ThreadsOf(executor);
  choice.bytes = data.size();
  choice.kernel = &kernels::BestKernelSet();
  choice.timings = PlanTimings(options, executor);
  Clock::duration longest_run;
  bool complete = TimeRounds(options, executor, data, start, budget,
                             &choice.timings, &longest_run);
  choice.longest_run = absl::FromChrono(longest_run);
  for (KernelTiming& t : choice.timings) {
    for (const KernelTiming& runner : choice.timings) {
      if (runner.kernel == t.same_as) {
        t.runs = runner.runs;
        t.best_seconds = runner.best_seconds;
        t.dropped = runner.dropped;
      }
    }
    complete = complete && t.runs > 0;
  }
  choice.calibrated = complete && !choice.timings.empty();
  if (choice.calibrated) choice.kernel = Choose(choice.timings);
  choice.elapsed = absl::FromChrono(Clock::now() - start);
  return choice;
}

const KernelSet& AutoKernel(Algorithm algorithm, Executor* executor) {
  Table& table = GlobalTable();
  const std::pair<Algorithm, size_t> key(algorithm, ThreadsOf(executor));
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = table.choices.find(key);
  if (it == table.choices.end()) {
    it = table.choices
             .emplace(key,
                      CalibrateKernel(algorithm, executor, kCalibrationBudget,
                                      CalibrationData()))
             .first;
  }
  return *it->second.kernel;
}

std::vector<KernelChoice> CalibrateAutoKernels(
    absl::Span<const Algorithm> algorithms, Executor* executor,
    absl::Duration total) {
  const Clock::time_point start = Clock::now();
  std::vector<uint8_t> data;  // made at the first choice not in the table
  Table& table = GlobalTable();
  std::vector<KernelChoice> out;
  std::lock_guard<std::mutex> lock(table.mu);
  for (Algorithm algorithm : algorithms) {
    const std::pair<Algorithm, size_t> key(algorithm, ThreadsOf(executor));
    auto it = table.choices.find(key);
    if (it == table.choices.end()) {
      if (data.empty()) data = CalibrationData();
      // Past the total, a zero budget: the fallback, untimed.
      const absl::Duration left = std::max(
          absl::ZeroDuration(), total - absl::FromChrono(Clock::now() - start));
      it = table.choices
               .emplace(key, CalibrateKernel(algorithm, executor,
                                             std::min(kCalibrationBudget, left),
                                             data))
               .first;
    }
    out.push_back(it->second);
  }
  return out;
}

std::string DescribeChoice(const KernelChoice& choice) {
  const std::string head = absl::StrCat(
      AlgorithmName(choice.algorithm), ", ", choice.threads,
      choice.threads == 1 ? " thread: " : " threads: ", choice.kernel->name);
  if (!choice.calibrated) {
    return absl::StrCat(head, " (not calibrated: the budget ran out after ",
                        absl::ToInt64Milliseconds(choice.elapsed), " ms)");
  }
  std::vector<std::string> parts;
  int runs = 0;
  for (const KernelTiming& t : choice.timings) {
    if (t.same_as != t.kernel) {
      parts.push_back(absl::StrCat(t.kernel->name, " = ", t.same_as->name));
      continue;
    }
    if (!t.dropped) runs = runs == 0 ? t.runs : std::min(runs, t.runs);
    parts.push_back(absl::StrFormat(
        "%s %s %.2f GB/s%s", t.kernel->name, StrategyName(t.strategy),
        static_cast<double>(choice.bytes) / t.best_seconds / 1e9,
        t.dropped ? absl::StrCat(" (dropped after ", t.runs, " runs)") : ""));
  }
  return absl::StrCat(head, " (", absl::StrJoin(parts, ", "), "; best of ",
                      runs, runs == 1 ? " run, " : " runs, ",
                      absl::ToInt64Milliseconds(choice.elapsed), " ms)");
}

}  // namespace chunkd::chunking
