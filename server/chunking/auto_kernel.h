// The automatic stage-1 kernel: per algorithm and thread count, the kernel
// that is fastest on the CPU this process runs on, found by a short
// calibration (docs/design.md, "The automatic kernel").
//
// The widest instruction set is not always the fastest: on Zen 4, 512-bit
// operations are split into two 256-bit halves, and an algorithm whose
// automatic strategy skips bytes (FastCDC's reference cutter) can beat a
// kernel that reads them all. So when no kernel is forced (EngineOptions::
// kernel null, CHUNKD_BACKEND unset) the engine asks AutoKernel, which times
// FastChunks with every supported kernel and its automatic strategy over a
// buffer of its own (kCalibrationBytes of seeded random bytes, the
// algorithm's default parameters): rounds of one run per kernel,
// interleaved so that a burst of load from elsewhere hits every kernel
// alike, the fastest run of each kernel counting; a kernel far slower than
// the fastest after two rounds sits out the rest. The choice is the
// narrowest kernel within kCalibrationMargin of the fastest; kernels whose
// automatic strategy uses no kernel (the reference cutter, fixed) run the
// same code and are timed once, as the narrowest of them.
//
// Time is bounded: a calibration never starts a run expected to end past its
// budget (kCalibrationBudget per algorithm and thread count;
// CalibrateAutoKernels also stops at a total budget), expected from the
// kernel's fastest run so far (a first run is expected to take nothing); so
// it overruns by at most one run, the one that took longer than expected.
// Without one run of every candidate it keeps kernels::BestKernelSet(), the
// choice before calibration existed.
//
// Thread safety: CalibrateKernel is a pure function of its arguments (it
// runs FastChunks with explicit kernels, so it never consults AutoKernel).
// AutoKernel and CalibrateAutoKernels share one process-wide table behind a
// mutex; a choice, once made, never changes for the life of the process.
#ifndef CHUNKD_CHUNKING_AUTO_KERNEL_H_
#define CHUNKD_CHUNKING_AUTO_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "chunkd/chunker.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"

namespace chunkd::chunking {

// The calibration buffer: 4 MiB holds a few chunks of every algorithm's
// default parameters (rabin's average is 1 MiB) and takes milliseconds per
// run, so that a 50 ms budget gives every kernel a few runs.
inline constexpr size_t kCalibrationBytes = size_t{4} << 20;
inline constexpr uint64_t kCalibrationSeed = 0x6368756e6b64;  // "chunkd"

// A wider kernel is chosen only when it beats every narrower one by more
// than this fraction of the fastest time. Within it the narrower kernel
// wins: best-of-rounds timings of one kernel vary by about 1-2 % between
// calibrations, so a smaller margin would let near-equal kernels swap from
// one start to the next, and a narrower kernel keeps 512-bit units idle
// for the rest of the process. 3 % keeps auto within 3 % of the fastest
// kernel as calibrated.
inline constexpr double kCalibrationMargin = 0.03;

// At most this many runs per kernel in one calibration: enough for a
// best-of-rounds time, few enough not to spend the budget on a decided
// case.
inline constexpr int kCalibrationMaxRounds = 8;

// After two rounds, a kernel whose best run is slower than this many times
// the fastest is dropped from the later rounds: it cannot come within the
// margin, and its runs (often the scalar reference cutter, the slowest by
// far) would leave the contenders fewer rounds of the budget. Two runs and
// a loose factor, so that one run slowed by load (a helper thread waiting
// for a core can make a short run many times slower) drops no contender.
inline constexpr double kCalibrationDropFactor = 2.0;

// The time one algorithm on one thread count may take (the per-choice
// bound), and the bound of CalibrateAutoKernels as the server calls it: 7
// algorithms x 50 ms, on one thread count.
inline constexpr absl::Duration kCalibrationBudget = absl::Milliseconds(50);
inline constexpr absl::Duration kCalibrationTotalBudget =
    absl::Milliseconds(400);

// One candidate kernel of a calibration.
struct KernelTiming {
  const kernels::KernelSet* kernel = nullptr;
  // Its automatic strategy for the algorithm on this thread count.
  Strategy strategy = Strategy::kAuto;
  // The kernel whose runs stand for this one's: itself, or the narrowest
  // candidate that runs the same code (the strategy uses no kernel).
  const kernels::KernelSet* same_as = nullptr;
  int runs = 0;               // of same_as
  double best_seconds = 0.0;  // the fastest run of same_as; 0 without runs
  // Left out of the rounds after the second (kCalibrationDropFactor).
  bool dropped = false;
};

// The automatic kernel of one algorithm on one thread count, and how it was
// found.
struct KernelChoice {
  Algorithm algorithm = Algorithm::kFastCdc;
  size_t threads = 1;  // the executor's parallelism (1 without one)
  size_t bytes = 0;    // of the calibration buffer
  const kernels::KernelSet* kernel = nullptr;
  // True when every candidate ran at least once; false: the budget ran out
  // first and `kernel` is kernels::BestKernelSet().
  bool calibrated = false;
  // Supported kernels, narrowest first (scalar, avx2, avx512).
  std::vector<KernelTiming> timings;
  absl::Duration elapsed;      // time the calibration took
  absl::Duration longest_run;  // its longest run (the budget's overrun bound)
};

// Seeded random bytes (kCalibrationSeed) of `size` bytes: the buffer
// CalibrateKernel is given by AutoKernel and CalibrateAutoKernels.
std::vector<uint8_t> CalibrationData(size_t size = kCalibrationBytes);

// Times every supported kernel on `algorithm`'s default parameters over
// `data` with `executor` (null: one thread), within `budget`, and chooses as
// the header comment says. Never fails: a budget of zero returns at once
// with kernels::BestKernelSet().
KernelChoice CalibrateKernel(Algorithm algorithm, Executor* executor,
                             absl::Duration budget,
                             absl::Span<const uint8_t> data);

// The automatic kernel of `algorithm` with `executor` (null: one thread):
// from the process-wide table, keyed by algorithm and the executor's
// parallelism, calibrating the entry first (with that executor and
// kCalibrationBudget) if no earlier call did. Always supported by this CPU.
const kernels::KernelSet& AutoKernel(Algorithm algorithm, Executor* executor);

// Calibrates every algorithm of `algorithms` on `executor` (null: one
// thread) that the table does not hold yet, each within kCalibrationBudget
// and all within `total` (the ones left when it runs out keep
// kernels::BestKernelSet() without being timed, calibrated false), and stores
// the choices in the table. For a server, before it takes requests, while
// its executor is idle. Returns every algorithm's choice, in the order
// given, including ones made earlier.
std::vector<KernelChoice> CalibrateAutoKernels(
    absl::Span<const Algorithm> algorithms, Executor* executor,
    absl::Duration total = kCalibrationTotalBudget);

// One line for a log: "fastcdc, 2 threads: avx2 (scalar reference 1.10
// GB/s, avx2 = scalar, avx512 two-stage 0.98 GB/s; 3 runs each, 31 ms)".
std::string DescribeChoice(const KernelChoice& choice);

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_AUTO_KERNEL_H_
