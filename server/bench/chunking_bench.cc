// chunking_bench: throughput of every chunking path side by side, on the same
// buffers in one run (docs/benchmarks.md, "How we measure").
//
// Registrations, each reporting bytes/s of input (real time, so that
// multi-threaded runs are measured by the wall clock):
//
//   chunk/ALG/DATASET/reference/reference/threads:1
//       ReferenceChunks, the scalar sequential specification.
//   chunk/ALG/DATASET/reference/reference/threads:N (N > 1)
//       FastChunks with the reference strategy: the reference cutter in
//       speculative parallel segments (chunking/engine.h).
//   chunk/ALG/DATASET/KERNEL/STRATEGY/threads:N
//       FastChunks with that stage-1 kernel and strategy (auto, two-stage,
//       sequential; fixed, which has no stage 1, only auto) on a
//       ThreadPoolExecutor of N threads (N = 1: no executor). The label
//       names the plan's strategy, so "auto" shows what it chose. A kernel
//       this CPU cannot run is registered anyway and skipped with the reason.
//   chunk/ALG/DATASET/auto/auto/threads:N
//       FastChunks as a library user gets it by default: no kernel given,
//       so the automatic kernel of the algorithm on N threads
//       (chunking/auto_kernel.h; CHUNKD_BACKEND's when set), automatic
//       strategy. The label adds the kernel it chose; report.py sets it
//       against the fastest KERNEL/auto row of the same thread count.
//   chunk/ALG/DATASET/KERNEL/stream/threads:N
//       StreamChunker (automatic strategy) fed the buffer in 1 MiB pieces.
//   stage1/ALG/DATASET/KERNEL/block:B/threads:1
//       Stage 1 alone: the kernel's bitmaps for the whole buffer in calls of
//       B = 256 or 260 KiB, on one thread, checked against the scalar
//       kernel's bits. Set against the chunk/ rows it shows whether stage 1
//       or the rest of the engine (stage 2, scheduling) dominates. Not for
//       fixed.
//   ceiling/sum64/DATASET/threads:N, ceiling/memcpy/DATASET/threads:N
//       The memory-read loop (and memcpy) over the same buffer on N threads:
//       what no chunker reading every byte can beat.
//
// ALG is every algorithm (AllAlgorithms()) with BenchOptions() (the parameters
// of the chunking targets); DATASET is `random` (64 MiB of seeded random bytes)
// or `versioned` (an 8 MiB base file and 7 edited versions, concatenated).
// Every run compares its chunks with ReferenceChunks of the same buffer
// (computed once, before any timing) and fails with SkipWithError at the
// first difference, so a fast but wrong kernel cannot report a number.
//
// Flags besides Google Benchmark's (--benchmark_filter, --benchmark_out, ...):
//   --threads=1,2             thread counts of the fast paths and ceilings
//   --size=BYTES              bytes per dataset (default 67108864)
//   --datasets=random,versioned
//   --strategies=auto,two-stage,sequential,reference
// (parsed in chunking_bench_support.cc). `make bench` runs this and
// server/bench/report.py.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bench/chunking_bench_support.h"
#include "chunkd/chunker.h"
#include "chunking/drivers/driver.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "workload/harness.h"

namespace chunkd::bench {
namespace {

using chunking::Algorithm;
using chunking::Chunk;
using chunking::Strategy;

void BM_Reference(benchmark::State& state, Algorithm algorithm,
                  workload::Dataset dataset) {
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  const std::vector<Chunk>& want = Fixtures::Reference(algorithm, dataset);
  const chunking::ChunkerOptions options = workload::BenchOptions(algorithm);
  for (auto _ : state) {
    std::vector<Chunk> got = chunking::ReferenceChunks(options, data);
    if (absl::Status s = workload::CompareChunks(want, got); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
  }
  state.SetLabel("strategy=reference");
  Finish(state, data.size(), want.size());
}

// `kernel` null: the engine's default (the automatic kernel).
void BM_Fast(benchmark::State& state, Algorithm algorithm,
             workload::Dataset dataset, const chunking::kernels::KernelSet* kernel,
             Strategy strategy, size_t threads) {
  if (kernel != nullptr && !kernel->supported()) {
    state.SkipWithError(
        absl::StrCat(kernel->name, ": not supported by this CPU or OS")
            .c_str());
    for (auto _ : state) {
    }
    return;
  }
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  const std::vector<Chunk>& want = Fixtures::Reference(algorithm, dataset);
  const chunking::ChunkerOptions options = workload::BenchOptions(algorithm);
  std::unique_ptr<chunking::Executor> executor = MakeExecutor(threads);
  chunking::EngineOptions engine;
  engine.kernel = kernel;
  engine.executor = executor.get();
  engine.strategy = strategy;
  // With no kernel given, this has run its calibration before the timing.
  absl::StatusOr<chunking::EnginePlan> plan =
      chunking::PlanEngine(options, engine);
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    for (auto _ : state) {
    }
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<Chunk>> got =
        chunking::FastChunks(options, data, engine);
    if (!got.ok()) {
      state.SkipWithError(std::string(got.status().message()).c_str());
      break;
    }
    if (absl::Status s = workload::CompareChunks(want, *got); !s.ok()) {
      state.SkipWithError(
          absl::StrCat(plan->kernel,
                       " differs from the reference: ", s.message())
              .c_str());
      break;
    }
  }
  state.SetLabel(absl::StrCat(
      "strategy=", chunking::StrategyName(plan->strategy),
      " segment=", plan->segment_size, " parallelism=", plan->parallelism,
      " kernel=", plan->kernel));
  Finish(state, data.size(), want.size());
}

// StreamChunker over the same buffer in pieces of kStreamPiece bytes (as
// chunkctl and a gRPC stream feed it), automatic strategy: what streaming
// costs over FastChunks on the whole buffer.
constexpr size_t kStreamPiece = size_t{1} << 20;

void BM_Stream(benchmark::State& state, Algorithm algorithm,
               workload::Dataset dataset,
               const chunking::kernels::KernelSet* kernel, size_t threads) {
  if (!kernel->supported()) {
    state.SkipWithError(
        absl::StrCat(kernel->name, ": not supported by this CPU or OS")
            .c_str());
    for (auto _ : state) {
    }
    return;
  }
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  const std::vector<Chunk>& want = Fixtures::Reference(algorithm, dataset);
  const chunking::ChunkerOptions options = workload::BenchOptions(algorithm);
  std::unique_ptr<chunking::Executor> executor = MakeExecutor(threads);
  chunking::EngineOptions engine;
  engine.kernel = kernel;
  engine.executor = executor.get();
  std::string strategy;
  std::vector<Chunk> got;
  got.reserve(want.size());
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<chunking::StreamChunker>> chunker =
        chunking::StreamChunker::Create(options, engine);
    if (!chunker.ok()) {
      state.SkipWithError(std::string(chunker.status().message()).c_str());
      break;
    }
    strategy = std::string(chunking::StrategyName((*chunker)->plan().strategy));
    got.clear();
    for (size_t pos = 0; pos < data.size(); pos += kStreamPiece) {
      const size_t n = std::min(kStreamPiece, data.size() - pos);
      (*chunker)->Append(
          absl::string_view(reinterpret_cast<const char*>(data.data()) + pos,
                            n),
          &got);
    }
    (*chunker)->Finish(&got);
    if (absl::Status s = workload::CompareChunks(want, got); !s.ok()) {
      state.SkipWithError(absl::StrCat(kernel->name,
                                       " stream differs from the reference: ",
                                       s.message())
                              .c_str());
      break;
    }
  }
  state.SetLabel(absl::StrCat("strategy=", strategy));
  Finish(state, data.size(), want.size());
}

// Stage 1 over a whole buffer in calls of `block` positions each, each call
// with the bytes before it as context (so the bits are those of the whole
// stream), returning a digest of every bitmap word and its position so that
// two kernels can be compared cheaply. Two call lengths are measured: 256
// KiB, a power of two like the engine's automatic segments, and 260 KiB. A
// kernel that interleaves lanes spaced length / L apart can lose much of its
// speed to cache-set aliasing when that spacing is a power of two; the pair
// shows it.
constexpr size_t kStage1Blocks[] = {size_t{256} << 10, size_t{260} << 10};

class Stage1Runner {
 public:
  // REQUIRES: `algorithm` has a stage 1 (every algorithm but fixed).
  Stage1Runner(Algorithm algorithm, size_t block)
      : driver_(chunking::NewDriver(workload::BenchOptions(algorithm))),
        stages_(*driver_->two_stage()),
        block_(block),
        first_(chunking::kernels::BitmapWords(block)),
        second_(chunking::kernels::BitmapWords(block)) {}

  uint64_t Run(const chunking::kernels::KernelSet& kernel,
               const std::vector<uint8_t>& data) {
    // The multiplications are independent of each other; only the additions
    // chain, so the digest costs far less than the kernel.
    const bool two = stages_.bitmaps() > 1;
    uint64_t digest = 0;
    uint64_t index = 1;
    for (size_t begin = 0; begin < data.size(); begin += block_) {
      const size_t end = std::min(data.size(), begin + block_);
      const size_t words = chunking::kernels::BitmapWords(end - begin);
      stages_.Stage1(kernel, data.data(), begin, end, first_.data(),
                     two ? second_.data() : nullptr);
      for (size_t i = 0; i < words; ++i, index += 2) {
        digest += first_[i] * index;
        if (two) digest += second_[i] * (index + 0x9e3779b97f4a7c15);
      }
    }
    return digest;
  }

 private:
  // The algorithm's driver, whose Stage1 calls its kernel of a kernel set
  // with the parameters of BenchOptions (drivers/driver.h).
  const std::unique_ptr<chunking::AlgorithmDriver> driver_;
  const chunking::BitmapDriver& stages_;
  const size_t block_;
  std::vector<uint64_t> first_;
  std::vector<uint64_t> second_;
};

void BM_Stage1(benchmark::State& state, Algorithm algorithm,
               workload::Dataset dataset,
               const chunking::kernels::KernelSet* kernel, size_t block) {
  if (!kernel->supported()) {
    state.SkipWithError(
        absl::StrCat(kernel->name, ": not supported by this CPU or OS")
            .c_str());
    for (auto _ : state) {
    }
    return;
  }
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  Stage1Runner runner(algorithm, block);
  const uint64_t want = runner.Run(chunking::kernels::ScalarKernelSet(), data);
  for (auto _ : state) {
    if (runner.Run(*kernel, data) != want) {
      state.SkipWithError(absl::StrCat(kernel->name,
                                       " stage-1 bitmaps differ from the "
                                       "scalar kernel's")
                              .c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.size()));
}

void BM_SumWords(benchmark::State& state, workload::Dataset dataset,
                 size_t threads) {
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  std::unique_ptr<chunking::Executor> executor = MakeExecutor(threads);
  const uint64_t want = workload::SumWords(data.data(), data.size());
  for (auto _ : state) {
    const uint64_t sum =
        workload::SumWordsParallel(executor.get(), data.data(), data.size());
    benchmark::DoNotOptimize(sum);
    if (sum != want) {
      state.SkipWithError("parallel sum differs from the sequential one");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.size()));
}

void BM_MemCopy(benchmark::State& state, workload::Dataset dataset,
                size_t threads) {
  const std::vector<uint8_t>& data = Fixtures::Data(dataset);
  std::unique_ptr<chunking::Executor> executor = MakeExecutor(threads);
  std::vector<uint8_t> copy(data.size());
  for (auto _ : state) {
    workload::CopyParallel(executor.get(), copy.data(), data.data(),
                           data.size());
    benchmark::ClobberMemory();
  }
  if (std::memcmp(copy.data(), data.data(), data.size()) != 0) {
    state.SkipWithError("the copy differs from the source");
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(data.size()));
}

void Configure(benchmark::internal::Benchmark* b) {
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

void RegisterAll() {
  const Flags& flags = GetFlags();
  for (workload::Dataset dataset : flags.datasets) {
    const std::string ds(workload::DatasetName(dataset));
    for (size_t threads : flags.threads) {
      Configure(benchmark::RegisterBenchmark(
          absl::StrCat("ceiling/sum64/", ds, "/threads:", threads).c_str(),
          BM_SumWords, dataset, threads));
      Configure(benchmark::RegisterBenchmark(
          absl::StrCat("ceiling/memcpy/", ds, "/threads:", threads).c_str(),
          BM_MemCopy, dataset, threads));
    }
  }
  for (Algorithm algorithm : chunking::AllAlgorithms()) {
    const std::string alg(chunking::AlgorithmName(algorithm));
    // Fixed-size chunking has no stage 1: no stage-1 rows, and its strategies
    // are all the same.
    const bool stage1 =
        chunking::NewDriver(workload::BenchOptions(algorithm))->two_stage() !=
        nullptr;
    for (workload::Dataset dataset : flags.datasets) {
      const std::string ds(workload::DatasetName(dataset));
      Configure(benchmark::RegisterBenchmark(
          absl::StrCat("chunk/", alg, "/", ds, "/reference/reference/threads:1")
              .c_str(),
          BM_Reference, algorithm, dataset));
      // The engine's reference strategy (no kernel) in speculative segments.
      for (size_t threads : flags.threads) {
        if (threads <= 1 || !stage1) continue;
        if (std::find(flags.strategies.begin(), flags.strategies.end(),
                      Strategy::kReference) == flags.strategies.end()) {
          continue;
        }
        Configure(benchmark::RegisterBenchmark(
            absl::StrCat("chunk/", alg, "/", ds,
                         "/reference/reference/threads:", threads)
                .c_str(),
            BM_Fast, algorithm, dataset, &chunking::kernels::ScalarKernelSet(),
            Strategy::kReference, threads));
      }
      // The engine's default: the automatic kernel.
      for (size_t threads : flags.threads) {
        if (std::find(flags.strategies.begin(), flags.strategies.end(),
                      Strategy::kAuto) == flags.strategies.end()) {
          break;
        }
        Configure(benchmark::RegisterBenchmark(
            absl::StrCat("chunk/", alg, "/", ds, "/auto/auto/threads:",
                         threads)
                .c_str(),
            BM_Fast, algorithm, dataset, nullptr, Strategy::kAuto, threads));
      }
      for (const chunking::kernels::KernelSet* kernel :
           chunking::kernels::AllKernelSets()) {
        for (size_t block : kStage1Blocks) {
          if (!stage1) break;
          Configure(benchmark::RegisterBenchmark(
              absl::StrCat("stage1/", alg, "/", ds, "/", kernel->name,
                           "/block:", block, "/threads:1")
                  .c_str(),
              BM_Stage1, algorithm, dataset, kernel, block));
        }
        for (size_t threads : flags.threads) {
          if (!stage1) break;
          Configure(benchmark::RegisterBenchmark(
              absl::StrCat("chunk/", alg, "/", ds, "/", kernel->name,
                           "/stream/threads:", threads)
                  .c_str(),
              BM_Stream, algorithm, dataset, kernel, threads));
        }
        for (Strategy strategy : flags.strategies) {
          for (size_t threads : flags.threads) {
            // The reference strategy uses no kernel (registered above);
            // fixed has no stage 1, so its strategies are all the same.
            if (strategy == Strategy::kReference) continue;
            if (!stage1 && strategy != Strategy::kAuto) continue;
            Configure(benchmark::RegisterBenchmark(
                absl::StrCat("chunk/", alg, "/", ds, "/", kernel->name, "/",
                             chunking::StrategyName(strategy),
                             "/threads:", threads)
                    .c_str(),
                BM_Fast, algorithm, dataset, kernel, strategy, threads));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace chunkd::bench

int main(int argc, char** argv) {
  if (!chunkd::bench::ParseOwnFlags(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  chunkd::bench::AddContext();
  chunkd::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
