// The automatic kernel (auto_kernel.h): the budget stops a calibration
// early and it still picks a supported kernel; the choice follows the
// margin rule from the timings it reports; kernels that run the same code
// are timed once; a forced kernel (EngineOptions::kernel, CHUNKD_BACKEND)
// wins over the calibration; the process-wide choice is stable and
// thread-safe; the chunks never depend on it.
#include "chunking/auto_kernel.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using kernels::KernelSet;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

size_t SupportedCount() {
  size_t n = 0;
  for (const KernelSet* k : kernels::AllKernelSets())
    n += k->supported() ? 1 : 0;
  return n;
}

TEST(CalibrationDataTest, SeededAndSized) {
  const std::vector<uint8_t> a = CalibrationData(1001);
  const std::vector<uint8_t> b = CalibrationData(1001);
  ASSERT_EQ(a.size(), 1001u);
  EXPECT_EQ(a, b);
  // A prefix of a longer buffer: the same stream of bytes.
  const std::vector<uint8_t> longer = CalibrationData(2048);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), longer.begin()));
  // Not constant: random bytes take many values.
  std::vector<bool> seen(256);
  for (uint8_t byte : a) seen[byte] = true;
  EXPECT_GT(std::count(seen.begin(), seen.end(), true), 200);
}

TEST(CalibrateKernelTest, ZeroBudgetRunsNothingAndKeepsTheBestKernel) {
  const std::vector<uint8_t> data = CalibrationData();
  for (Algorithm algorithm : AllAlgorithms()) {
    const KernelChoice choice =
        CalibrateKernel(algorithm, nullptr, absl::ZeroDuration(), data);
    EXPECT_FALSE(choice.calibrated) << AlgorithmName(algorithm);
    EXPECT_EQ(choice.kernel, &kernels::BestKernelSet());
    EXPECT_EQ(choice.longest_run, absl::ZeroDuration());
    ASSERT_EQ(choice.timings.size(), SupportedCount());
    for (const KernelTiming& t : choice.timings) EXPECT_EQ(t.runs, 0);
    EXPECT_TRUE(absl::StrContains(DescribeChoice(choice), "not calibrated"));
  }
}

// crc32's scalar candidate is the reference cutter, some 2-10 ms per run on
// 4 MiB: kCalibrationMaxRounds rounds of every kernel would take far more
// than 5 ms, so the budget, not the round limit, ends the calibration, at
// most one run late.
TEST(CalibrateKernelTest, SmallBudgetStopsEarlyWithASupportedKernel) {
  const std::vector<uint8_t> data = CalibrationData();
  const absl::Duration budget = absl::Milliseconds(5);
  const KernelChoice choice =
      CalibrateKernel(Algorithm::kCrc32, nullptr, budget, data);
  ASSERT_NE(choice.kernel, nullptr);
  EXPECT_TRUE(choice.kernel->supported());
  int most_runs = 0;
  for (const KernelTiming& t : choice.timings) {
    most_runs = std::max(most_runs, t.runs);
  }
  EXPECT_LT(most_runs, kCalibrationMaxRounds);
  // Bookkeeping outside the runs is microseconds; the slack covers a
  // preempted thread on a loaded machine, not a calibration that ignores
  // its budget (most_runs above catches that without a clock).
  EXPECT_LE(choice.elapsed,
            budget + choice.longest_run + absl::Milliseconds(500));
  if (!choice.calibrated) {
    EXPECT_EQ(choice.kernel, &kernels::BestKernelSet());
  }
}

// A budget no machine runs out of, however loaded: the round limit ends
// these calibrations, so every candidate is timed.
constexpr absl::Duration kAmpleBudget = absl::Seconds(120);

// The choice is the narrowest candidate within the margin of the fastest,
// as the reported timings say; kernels that run the same code share their
// timing with the narrowest of them.
TEST(CalibrateKernelTest, ChoiceFollowsTheMarginRule) {
  const std::vector<uint8_t> data = CalibrationData();
  ThreadPoolExecutor two(2);
  for (Executor* executor :
       {static_cast<Executor*>(nullptr), static_cast<Executor*>(&two)}) {
    for (Algorithm algorithm : AllAlgorithms()) {
      SCOPED_TRACE(AlgorithmName(algorithm));
      const KernelChoice choice =
          CalibrateKernel(algorithm, executor, kAmpleBudget, data);
      ASSERT_TRUE(choice.calibrated) << DescribeChoice(choice);
      EXPECT_EQ(choice.threads, executor == nullptr ? 1u : 2u);
      EXPECT_EQ(choice.bytes, data.size());
      // The narrowest candidate whose code uses no kernel, if any.
      const KernelSet* kernel_free = nullptr;
      for (const KernelTiming& t : choice.timings) {
        if (kernel_free == nullptr && (algorithm == Algorithm::kFixed ||
                                       t.strategy == Strategy::kReference)) {
          kernel_free = t.kernel;
        }
      }
      double fastest = 0;
      for (const KernelTiming& t : choice.timings) {
        ASSERT_GT(t.runs, 0);
        ASSERT_GT(t.best_seconds, 0);
        EXPECT_NE(t.strategy, Strategy::kAuto);
        if (fastest == 0 || t.best_seconds < fastest) fastest = t.best_seconds;
        if (algorithm == Algorithm::kFixed ||
            t.strategy == Strategy::kReference) {
          // No kernel in the code: the narrowest such candidate ran it.
          EXPECT_EQ(t.same_as, kernel_free);
        } else {
          EXPECT_EQ(t.same_as, t.kernel);
        }
      }
      // A dropped kernel ran twice, and was far slower than the fastest.
      for (const KernelTiming& t : choice.timings) {
        if (!t.dropped) continue;
        EXPECT_EQ(t.runs, 2) << t.kernel->name;
        EXPECT_GT(t.best_seconds, kCalibrationDropFactor * fastest)
            << t.kernel->name;
        EXPECT_NE(t.kernel, choice.kernel);
      }
      bool chosen_seen = false;
      for (const KernelTiming& t : choice.timings) {
        const bool within =
            t.best_seconds <= fastest * (1 + kCalibrationMargin);
        if (t.kernel == choice.kernel) {
          EXPECT_TRUE(within);
          chosen_seen = true;
          break;
        }
        EXPECT_FALSE(within)
            << t.kernel->name << " is narrower and within the margin";
      }
      EXPECT_TRUE(chosen_seen) << DescribeChoice(choice);
      const std::string line = DescribeChoice(choice);
      EXPECT_TRUE(absl::StartsWith(line, AlgorithmName(algorithm))) << line;
      EXPECT_TRUE(absl::StrContains(line, choice.kernel->name)) << line;
    }
  }
}

TEST(CalibrateKernelTest, FixedHasNoKernelToTime) {
  const KernelChoice choice = CalibrateKernel(
      Algorithm::kFixed, nullptr, kAmpleBudget, CalibrationData());
  ASSERT_TRUE(choice.calibrated);
  EXPECT_EQ(choice.kernel, &kernels::ScalarKernelSet());
}

// The engine's default kernel is the table's choice, stable from call to
// call, per thread count; CHUNKD_BACKEND and EngineOptions::kernel win.
TEST(AutoKernelTest, EngineDefaultIsTheAutomaticKernelUnlessForced) {
  ScopedEnv unset("CHUNKD_BACKEND", nullptr);
  ThreadPoolExecutor two(2);
  for (Algorithm algorithm : AllAlgorithms()) {
    SCOPED_TRACE(AlgorithmName(algorithm));
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(&two)}) {
      const KernelSet& chosen = AutoKernel(algorithm, executor);
      EXPECT_TRUE(chosen.supported());
      EXPECT_EQ(&AutoKernel(algorithm, executor), &chosen);
      EngineOptions engine;
      engine.executor = executor;
      absl::StatusOr<EnginePlan> plan =
          PlanEngine(DefaultOptions(algorithm), engine);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->kernel, chosen.name);
    }
    EngineOptions forced;
    forced.kernel = &kernels::ScalarKernelSet();
    absl::StatusOr<EnginePlan> plan =
        PlanEngine(DefaultOptions(algorithm), forced);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->kernel, "scalar");
  }
  for (const KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    ScopedEnv env("CHUNKD_BACKEND", kernel->name);
    for (Algorithm algorithm : AllAlgorithms()) {
      absl::StatusOr<EnginePlan> plan = PlanEngine(DefaultOptions(algorithm));
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->kernel, kernel->name) << AlgorithmName(algorithm);
    }
  }
}

// Choices stored by CalibrateAutoKernels are the ones AutoKernel returns
// later; past the total budget an algorithm keeps the best kernel untimed.
// Three threads: a thread count no other test of this process uses.
TEST(AutoKernelTest, ExplicitCalibrationFillsTheTable) {
  ThreadPoolExecutor three(3);
  const std::vector<Algorithm> algorithms = {Algorithm::kFastCdc,
                                             Algorithm::kCrc32};
  const std::vector<KernelChoice> choices =
      CalibrateAutoKernels(algorithms, &three, absl::ZeroDuration());
  ASSERT_EQ(choices.size(), 2u);
  for (size_t i = 0; i < choices.size(); ++i) {
    EXPECT_EQ(choices[i].algorithm, algorithms[i]);
    EXPECT_EQ(choices[i].threads, 3u);
    EXPECT_FALSE(choices[i].calibrated);
    EXPECT_EQ(choices[i].kernel, &kernels::BestKernelSet());
    EXPECT_EQ(&AutoKernel(algorithms[i], &three), choices[i].kernel);
  }
  // A second call, with time to spare, returns the stored choices.
  const std::vector<KernelChoice> again =
      CalibrateAutoKernels(algorithms, &three, absl::Seconds(10));
  ASSERT_EQ(again.size(), 2u);
  EXPECT_FALSE(again[0].calibrated);
  EXPECT_FALSE(again[1].calibrated);
}

// Four threads: a thread count no other test of this process uses, so that
// the calls race for the entry's first calibration.
TEST(AutoKernelTest, ConcurrentFirstUseAgrees) {
  constexpr int kThreads = 4;
  ThreadPoolExecutor four(4);
  std::vector<const KernelSet*> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(
        [&got, &four, i] { got[i] = &AutoKernel(Algorithm::kBuzhash, &four); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(got[0]->supported());
  for (int i = 1; i < kThreads; ++i) EXPECT_EQ(got[i], got[0]);
}

// Whatever the automatic kernel, the chunks are the reference's.
TEST(AutoKernelTest, DefaultEngineChunksEqualTheReference) {
  ScopedEnv unset("CHUNKD_BACKEND", nullptr);
  const std::vector<uint8_t> data = CalibrationData(size_t{3} << 20);
  ThreadPoolExecutor two(2);
  for (Algorithm algorithm : AllAlgorithms()) {
    const ChunkerOptions options = DefaultOptions(algorithm);
    const std::vector<Chunk> want = ReferenceChunks(options, data);
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(&two)}) {
      EngineOptions engine;
      engine.executor = executor;
      absl::StatusOr<std::vector<Chunk>> got =
          FastChunks(options, data, engine);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, want) << AlgorithmName(algorithm);
    }
  }
}

}  // namespace
}  // namespace chunkd::chunking
