// Exactness of the fast engine (docs/design.md, "How exactness is tested"):
// FastChunks and StreamChunker equal ReferenceChunks for every algorithm ×
// every kernel set × threads {1, 2, 3, 8} × segment sizes {4 KiB + 1,
// 64 KiB, 1 MiB} × message splits {1 B, 4093 B, 1 MiB, random} × the
// strategies two-stage, sequential and reference, on seeded random data, zeros,
// 0xFF, short repeating patterns and low-entropy text; every size from 0 to 3 *
// max with small parameters and tiny segments, so that segment, word and
// vector-width edges fall on every offset; and default-size parameters on a few
// MiB.
//
// The suites are instantiated once per kernel set built into the binary
// (test names end in /scalar, /avx2, /avx512, the matrix's in _scalar, ...;
// CMake labels them so that `ctest -L avx512` runs one kernel set); the
// matrix also once per option set, every algorithm of the registry among
// them. A kernel set this CPU cannot run is skipped with the reason.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chunkd/chunker.h"
#include "chunking/cutter.h"
#include "chunking/executor.h"
#include "chunking/kernels/kernels.h"
#include "chunking/test_util.h"
#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

using testing::Bytes;

constexpr size_t kThreadCounts[] = {1, 2, 3, 8};
constexpr size_t kSegmentSizes[] = {4097, size_t{64} << 10, size_t{1} << 20};
constexpr Strategy kStrategies[] = {Strategy::kTwoStage,
                                    Strategy::kSequentialScan,
                                    Strategy::kReference};

enum class Split { kOneByte, k4093, kOneMiB, kRandom };
constexpr Split kSplits[] = {Split::kOneByte, Split::k4093, Split::kOneMiB,
                             Split::kRandom};

std::string SplitName(Split split) {
  switch (split) {
    case Split::kOneByte:
      return "1B";
    case Split::k4093:
      return "4093B";
    case Split::kOneMiB:
      return "1MiB";
    case Split::kRandom:
      return "random";
  }
  return "?";
}

// One executor per thread count, shared by every test of the binary.
Executor* ExecutorFor(size_t threads) {
  static auto* const kExecutors = new std::map<size_t, ThreadPoolExecutor*>();
  if (threads <= 1) return nullptr;
  auto it = kExecutors->find(threads);
  if (it == kExecutors->end()) {
    it = kExecutors->emplace(threads, new ThreadPoolExecutor(threads)).first;
  }
  return it->second;
}

absl::string_view View(const Bytes& data, size_t pos, size_t n) {
  return absl::string_view(reinterpret_cast<const char*>(data.data()) + pos, n);
}

std::string Describe(const EngineOptions& e) {
  return absl::StrCat("strategy ", StrategyName(e.strategy), " threads ",
                      e.executor == nullptr ? 1 : e.executor->parallelism(),
                      " segment ", e.segment_size, " window ", e.window_size);
}

// Streams `data` through a StreamChunker in pieces of next_size() bytes and
// checks after every call that the chunks so far are a prefix of `reference`,
// that each was final when emitted (max bytes after its start had arrived),
// that none is later than the documented lag (window_size bytes after it
// became final), and that ChunkData returns their bytes.
void ExpectStream(const ChunkerOptions& options, const EngineOptions& engine,
                  const Bytes& data, const std::vector<Chunk>& reference,
                  const std::function<size_t()>& next_size) {
  SCOPED_TRACE(Describe(engine));
  absl::StatusOr<std::unique_ptr<StreamChunker>> chunker =
      StreamChunker::Create(options, engine);
  ASSERT_TRUE(chunker.ok()) << chunker.status();
  const uint64_t final_size = MakeCutter(options).value()->final_size();
  const uint64_t window = (*chunker)->plan().window_size;
  std::vector<Chunk> out;
  size_t emitted = 0;
  size_t pos = 0;
  auto check = [&](bool at_end) {
    for (const Chunk& c : out) {
      ASSERT_LT(emitted, reference.size()) << "extra chunk at " << c.offset;
      ASSERT_EQ(c, reference[emitted]) << "chunk " << emitted;
      ASSERT_TRUE(at_end || c.offset + final_size <= pos)
          << "chunk at " << c.offset << " emitted before it was final";
      ASSERT_EQ((*chunker)->ChunkData(c), View(data, c.offset, c.length));
      ++emitted;
    }
    out.clear();
    if (at_end) {
      ASSERT_EQ(emitted, reference.size());
    } else if (emitted < reference.size()) {
      ASSERT_GT(reference[emitted].offset + final_size + window - 1, pos)
          << "chunk " << emitted << " is final but still held";
    }
  };
  while (pos < data.size()) {
    const size_t n = std::min(next_size(), data.size() - pos);
    (*chunker)->Append(View(data, pos, n), &out);
    pos += n;
    check(false);
    if (::testing::Test::HasFatalFailure()) return;
  }
  (*chunker)->Finish(&out);
  check(true);
  EXPECT_EQ((*chunker)->bytes_in(), data.size());
}

std::function<size_t()> Splitter(Split split, uint64_t seed) {
  switch (split) {
    case Split::kOneByte:
      return [] { return size_t{1}; };
    case Split::k4093:
      return [] { return size_t{4093}; };
    case Split::kOneMiB:
      return [] { return size_t{1} << 20; };
    case Split::kRandom:
      break;
  }
  auto rng = std::make_shared<std::mt19937_64>(seed);
  // Mostly small pieces, sometimes large ones, sometimes empty ones.
  return [rng] {
    const uint64_t r = (*rng)();
    switch (r % 4) {
      case 0:
        return size_t{0};
      case 1:
        return static_cast<size_t>((r >> 8) % 300);
      case 2:
        return static_cast<size_t>((r >> 8) % 70000);
      default:
        return static_cast<size_t>((r >> 8) % 1500000);
    }
  };
}

struct NamedOptions {
  std::string name;
  ChunkerOptions options;
};

// Small parameters (testing::SmallOptions: min 64, avg 256, max 1024) for
// every algorithm of the registry (AllAlgorithms()), so that the matrix
// covers an algorithm as soon as it exists, and variants of the modes and
// edges some of them have.
std::vector<NamedOptions> SmallOptionSets() {
  std::vector<NamedOptions> sets;
  for (Algorithm algorithm : AllAlgorithms()) {
    sets.push_back({std::string(AlgorithmName(algorithm)),
                    testing::SmallOptions(algorithm)});
  }
  ChunkerOptions odd = testing::SmallOptions(Algorithm::kFastCdc);
  odd.min_size = 65;
  odd.avg_size = 300;
  odd.max_size = 1025;
  odd.normalization_level = 3;
  odd.seed = 666;
  sets.push_back({"fastcdc_odd_level3_seed", odd});
  ChunkerOptions dec = testing::SmallOptions(Algorithm::kSeqCdc);
  dec.seq_mode = SeqMode::kDecreasing;
  dec.seq_length = 3;
  dec.skip_trigger = 7;
  dec.skip_size = 33;
  sets.push_back({"seqcdc_decreasing", dec});
  ChunkerOptions fixed = testing::SmallOptions(Algorithm::kFixed);
  fixed.avg_size = 1000;
  sets.push_back({"fixed_1000", fixed});
  ChunkerOptions narrow = testing::SmallOptions(Algorithm::kRepMaxCdc);
  narrow.min_size = 100;
  narrow.horizon_size = 37;
  sets.push_back({"repmaxcdc_narrow_horizon", narrow});
  ChunkerOptions rabin = testing::SmallOptions(Algorithm::kRabin);
  rabin.min_size = 300;
  rabin.avg_size = 64;
  rabin.max_size = 301;
  sets.push_back({"rabin_avg_below_min", rabin});
  ChunkerOptions buzhash = testing::SmallOptions(Algorithm::kBuzhash);
  buzhash.min_size = 48;
  buzhash.avg_size = 100;
  buzhash.max_size = 149;
  sets.push_back({"buzhash_min_window", buzhash});
  return sets;
}

Bytes Sawtooth(size_t size) {
  Bytes out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(i % 7);
  return out;
}

struct NamedData {
  std::string name;
  Bytes bytes;
};

// The inputs of the matrix, small so that every algorithm and kernel set
// fits in a modest run: random data is long enough for two 1 MiB segments
// and pieces, the structured ones for many 64 KiB segments.
const std::vector<NamedData>& MatrixInputs() {
  static const auto* const kInputs = new std::vector<NamedData>{
      {"random", testing::RandomBytes((size_t{1} << 20) + 12345, 7)},
      {"zeros", testing::ConstantBytes((size_t{1} << 18) + 4099, 0x00)},
      {"ones", testing::ConstantBytes((size_t{1} << 18) + 4099, 0xFF)},
      {"pattern",
       testing::RepeatingBytes((size_t{1} << 18) + 777, "abcdefgh12345")},
      {"sawtooth", Sawtooth((size_t{1} << 18) + 333)},
      {"text", testing::TextBytes((size_t{3} << 17) + 5, 2)},
  };
  return *kInputs;
}

// Bytes streamed one at a time: a prefix, to keep the time reasonable.
constexpr size_t kOneByteStreamBytes = 40000;

// The fixture of the engine's tests on one kernel set, named by
// KernelSetName(): a set this CPU cannot run is skipped with the reason.
template <class Param>
class KernelSetTest : public ::testing::TestWithParam<Param> {
 protected:
  virtual std::string KernelSetName() const = 0;

  void SetUp() override {
    absl::StatusOr<const kernels::KernelSet*> kernel =
        kernels::FindKernelSet(KernelSetName());
    if (!kernel.ok()) {
      GTEST_SKIP() << "kernel set " << KernelSetName()
                   << " unavailable: " << kernel.status();
    }
    kernel_ = *kernel;
  }

  EngineOptions Engine(size_t threads, size_t segment, Strategy strategy,
                       size_t window = 0) const {
    EngineOptions e;
    e.kernel = kernel_;
    e.executor = ExecutorFor(threads);
    e.segment_size = segment;
    e.window_size = window;
    e.strategy = strategy;
    return e;
  }

  void ExpectFast(const ChunkerOptions& options, const EngineOptions& engine,
                  absl::Span<const uint8_t> data,
                  const std::vector<Chunk>& reference) {
    absl::StatusOr<std::vector<Chunk>> chunks =
        FastChunks(options, data, engine);
    ASSERT_TRUE(chunks.ok()) << chunks.status();
    ASSERT_EQ(chunks->size(), reference.size()) << Describe(engine);
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_EQ((*chunks)[i], reference[i])
          << "chunk " << i << " of " << data.size() << " bytes, "
          << Describe(engine);
    }
  }

  // The full matrix for one option set on every input.
  void RunMatrix(const NamedOptions& set) {
    for (const NamedData& input : MatrixInputs()) {
      SCOPED_TRACE(set.name + " on " + input.name);
      const std::vector<Chunk> reference =
          ReferenceChunks(set.options, input.bytes);
      ASSERT_TRUE(
          testing::CoversStream(reference, input.bytes.size(), set.options));
      const Bytes one_byte_data(
          input.bytes.begin(),
          input.bytes.begin() +
              std::min(input.bytes.size(), kOneByteStreamBytes));
      const std::vector<Chunk> one_byte_reference =
          ReferenceChunks(set.options, one_byte_data);
      uint64_t seed = 1;
      for (size_t threads : kThreadCounts) {
        for (size_t segment : kSegmentSizes) {
          for (Strategy strategy : kStrategies) {
            ExpectFast(set.options, Engine(threads, segment, strategy),
                       input.bytes, reference);
            if (::testing::Test::HasFatalFailure()) return;
            for (Split split : kSplits) {
              SCOPED_TRACE("split " + SplitName(split));
              // Windows vary with the split so that the runs see the
              // engine both cutting on every piece and batching.
              size_t window = 0;
              if (split == Split::kOneByte) window = 1;
              if (split == Split::k4093) window = 1 + (seed % 3) * 30000;
              if (split == Split::kRandom) window = 65536 + 3;
              const EngineOptions engine =
                  Engine(threads, segment, strategy, window);
              if (split == Split::kOneByte) {
                ExpectStream(set.options, engine, one_byte_data,
                             one_byte_reference, Splitter(split, seed));
              } else {
                ExpectStream(set.options, engine, input.bytes, reference,
                             Splitter(split, seed));
              }
              ++seed;
              if (::testing::Test::HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }

  const kernels::KernelSet* kernel_ = nullptr;
};

// The matrix: one test per option set of SmallOptionSets() (every algorithm
// of the registry and the variants) and kernel set, named SET_KERNELSET.
class EngineMatrixTest : public KernelSetTest<std::tuple<size_t, std::string>> {
 protected:
  std::string KernelSetName() const override { return std::get<1>(GetParam()); }
};

TEST_P(EngineMatrixTest, EqualsReference) {
  RunMatrix(SmallOptionSets()[std::get<0>(GetParam())]);
}

INSTANTIATE_TEST_SUITE_P(
    Sets, EngineMatrixTest,
    ::testing::Combine(::testing::Range(size_t{0}, SmallOptionSets().size()),
                       ::testing::ValuesIn(testing::KernelNames())),
    [](const ::testing::TestParamInfo<std::tuple<size_t, std::string>>& info) {
      return SmallOptionSets()[std::get<0>(info.param)].name + "_" +
             std::get<1>(info.param);
    });

// Every algorithm of the registry is in the matrix, on its own.
TEST(EngineMatrixCoverageTest, EveryAlgorithmHasASet) {
  for (Algorithm algorithm : AllAlgorithms()) {
    bool found = false;
    for (const NamedOptions& set : SmallOptionSets()) {
      found = found || set.name == AlgorithmName(algorithm);
    }
    EXPECT_TRUE(found) << AlgorithmName(algorithm);
  }
}

// The other tests of the engine, one per kernel set (named .../KERNELSET).
class EngineTest : public KernelSetTest<std::string> {
 protected:
  std::string KernelSetName() const override { return GetParam(); }
};

// Every size from 0 to 3 * max + 1 with tiny segments (64, 100 and 4097
// bytes) and small windows: segment, word and vector-width edges land on
// every offset relative to every chunk boundary.
TEST_P(EngineTest, EverySizeUpToThreeMax) {
  const Bytes random = testing::RandomBytes(3 * 1025 + 2, 99);
  const Bytes text = testing::TextBytes(3 * 1025 + 2, 98);
  Bytes mixed = testing::RandomBytes(3 * 1025 + 2, 97);
  for (size_t i = 0; i < mixed.size(); ++i) {
    if ((i / 200) % 2 == 1) mixed[i] = static_cast<uint8_t>(i / 200);
  }
  struct Config {
    size_t threads;
    size_t segment;
    size_t window;
  };
  const Config configs[] = {
      {1, 64, 1}, {3, 100, 64}, {2, 4097, 0}, {2, 0, 1000}};
  for (const NamedOptions& set : SmallOptionSets()) {
    SCOPED_TRACE(set.name);
    const size_t limit = 3 * testing::BoundsFor(set.options).max + 1;
    for (const Bytes* data :
         {&random, &text, static_cast<const Bytes*>(&mixed)}) {
      for (size_t size = 0; size <= limit; ++size) {
        const absl::Span<const uint8_t> prefix(data->data(), size);
        const std::vector<Chunk> reference =
            ReferenceChunks(set.options, prefix);
        for (const Config& c : configs) {
          for (Strategy strategy : kStrategies) {
            ExpectFast(set.options,
                       Engine(c.threads, c.segment, strategy, c.window), prefix,
                       reference);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Default-size parameters and the named presets on a few MiB.
TEST_P(EngineTest, DefaultParametersAndPresets) {
  const Bytes data = testing::RandomBytes((size_t{6} << 20) + 321, 5);
  std::vector<NamedOptions> sets;
  for (Algorithm algorithm : AllAlgorithms()) {
    sets.push_back(
        {std::string(AlgorithmName(algorithm)), DefaultOptions(algorithm)});
  }
  for (const char* preset : {"fastcdc-reapi", "seqcdc-8k", "seqcdc-16k"}) {
    sets.push_back({preset, Preset(preset).value()});
  }
  ChunkerOptions level2 = DefaultOptions(Algorithm::kFastCdc);
  level2.normalization_level = 2;
  level2.seed = 666;
  sets.push_back({"fastcdc_level2_seed666", level2});
  for (const NamedOptions& set : sets) {
    SCOPED_TRACE(set.name);
    const std::vector<Chunk> reference = ReferenceChunks(set.options, data);
    for (size_t threads : kThreadCounts) {
      for (size_t segment : kSegmentSizes) {
        for (Strategy strategy : kStrategies) {
          ExpectFast(set.options, Engine(threads, segment, strategy), data,
                     reference);
          if (HasFatalFailure()) return;
        }
      }
    }
    ExpectStream(set.options, Engine(2, 4097, Strategy::kAuto), data, reference,
                 Splitter(Split::kRandom, 3));
    ExpectStream(set.options, Engine(3, size_t{64} << 10, Strategy::kAuto, 1),
                 data, reference, Splitter(Split::k4093, 0));
  }
}

// The FastCDC 2020 public vectors (fastcdc_test checks the reference against
// them field by field) through every configuration.
TEST_P(EngineTest, FastCdcPublicVectorInput) {
  const Bytes image = testing::ReadTestFile("SekienAkashita.jpg");
  ASSERT_EQ(image.size(), 109466u);
  for (uint64_t seed : {0, 666}) {
    ChunkerOptions options = DefaultOptions(Algorithm::kFastCdc);
    options.min_size = 4096;
    options.avg_size = 16384;
    options.max_size = 65535;
    options.normalization_level = 2;
    options.seed = seed;
    const std::vector<Chunk> reference = ReferenceChunks(options, image);
    ASSERT_EQ(reference.size(), 6u);
    for (size_t threads : kThreadCounts) {
      for (Strategy strategy : kStrategies) {
        for (size_t segment : {size_t{4097}, size_t{100}}) {
          ExpectFast(options, Engine(threads, segment, strategy), image,
                     reference);
        }
        for (Split split : kSplits) {
          ExpectStream(options, Engine(threads, 4097, strategy, 1), image,
                       reference, Splitter(split, 11));
        }
      }
    }
  }
}

// Every window size gives the same chunks, on the stream and whole-buffer
// paths; a window smaller than max_size still covers whole chunks.
TEST_P(EngineTest, AnyWindowSize) {
  const Bytes data = testing::RandomBytes((size_t{3} << 20) + 17, 12);
  for (const NamedOptions& set : SmallOptionSets()) {
    SCOPED_TRACE(set.name);
    const std::vector<Chunk> reference = ReferenceChunks(set.options, data);
    for (size_t window : {size_t{1}, size_t{63}, size_t{1000}, size_t{4093},
                          size_t{65536}, size_t{1} << 20, size_t{0}}) {
      for (Strategy strategy : kStrategies) {
        // Segments given and automatic (0: the round split across threads).
        const size_t segment = window % 2 == 1 ? 4097 : 0;
        const EngineOptions engine = Engine(2, segment, strategy, window);
        ExpectFast(set.options, engine, data, reference);
        ExpectStream(set.options, engine, data, reference,
                     Splitter(Split::kRandom, window));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Executors that stand for a shared pool whose threads are busy: every
// index of a ParallelFor runs on the calling thread, one after another —
// in order (the caller's worker does everything, the helpers start when
// there is nothing left) or in reverse (a "helper" index runs first and does
// everything).
class SerialExecutor final : public Executor {
 public:
  SerialExecutor(size_t parallelism, bool reverse)
      : parallelism_(parallelism), reverse_(reverse) {}
  size_t parallelism() const override { return parallelism_; }
  void ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) override {
    for (size_t i = 0; i < n; ++i) fn(reverse_ ? n - 1 - i : i);
  }

 private:
  const size_t parallelism_;
  const bool reverse_;
};

// The two-stage pipeline (engine.h) under every schedule: thread pools of
// {1, 2, 3, 8}, pools whose helpers never run concurrently, tiny and
// automatic segments, tiny and automatic windows; inputs where stage 2 is
// busy (crc32 on zeros cuts every min_size bytes) and where it is idle.
TEST_P(EngineTest, TwoStagePipelineSchedules) {
  std::vector<std::pair<std::string, Bytes>> inputs = {
      {"random", testing::RandomBytes((size_t{3} << 19) + 4321, 21)},
      {"zeros", testing::ConstantBytes((size_t{1} << 19) + 77, 0x00)},
      {"text", testing::TextBytes((size_t{1} << 19) + 5, 3)}};
  SerialExecutor serial(4, /*reverse=*/false);
  SerialExecutor reverse(3, /*reverse=*/true);
  std::vector<Executor*> executors = {nullptr, &serial, &reverse};
  for (size_t threads : kThreadCounts) {
    if (threads > 1) executors.push_back(ExecutorFor(threads));
  }
  for (const NamedOptions& set : SmallOptionSets()) {
    if (set.options.algorithm == Algorithm::kFixed) continue;
    SCOPED_TRACE(set.name);
    for (const auto& [name, data] : inputs) {
      SCOPED_TRACE(name);
      const std::vector<Chunk> reference = ReferenceChunks(set.options, data);
      for (Executor* executor : executors) {
        for (size_t segment :
             {size_t{0}, size_t{64}, size_t{100}, size_t{4097}}) {
          for (size_t window : {size_t{0}, size_t{1}, size_t{70000}}) {
            EngineOptions engine =
                Engine(1, segment, Strategy::kTwoStage, window);
            engine.executor = executor;
            ExpectFast(set.options, engine, data, reference);
            ExpectStream(set.options, engine, data, reference,
                         Splitter(Split::kRandom, segment + window));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// A kernel that stalls in the stage-1 call starting at stream position 0
// (FastChunks' first segment) while other threads go on: they may compute
// ahead only as far as the ring of bitmaps reaches — the next power of two
// of final_size + window + segment (engine.h) — and must then wait for stage
// 2, which waits for the stalled segment. The answer stays exact. Whether a
// helper runs during the stall depends on the machine's load; the bound and
// the exactness are checked either way.
const kernels::KernelSet* g_stall_inner = nullptr;
std::atomic<bool> g_stalling{false};
std::atomic<size_t> g_end_during_stall{0};
std::atomic<size_t> g_calls_during_stall{0};

void NoteCall(size_t end) {
  if (!g_stalling.load()) return;
  g_calls_during_stall.fetch_add(1);
  size_t seen = g_end_during_stall.load();
  while (end > seen && !g_end_during_stall.compare_exchange_weak(seen, end)) {
  }
}

void StallFirst(size_t begin) {
  if (begin != 0) return;
  g_stalling.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  g_stalling.store(false);
}

// Every stage-1 function of the inner kernel set, noted and stalled (in a
// namespace of their own that sees the kernels' parameter types).
namespace stalling {
using namespace ::chunkd::chunking::kernels;  // NOLINT: the parameter types
#define CHUNKD_STALLING(Function, member, parameters, arguments, unused) \
  void Function parameters {                                            \
    NoteCall(end);                                                      \
    StallFirst(begin);                                                  \
    g_stall_inner->member arguments;                                    \
  }
CHUNKD_KERNEL_FUNCTIONS(CHUNKD_STALLING, _)
#undef CHUNKD_STALLING
}  // namespace stalling
bool AlwaysSupported() { return true; }

TEST_P(EngineTest, TwoStageStallBoundsTheLookahead) {
  g_stall_inner = kernel_;
#define CHUNKD_STALLING_OF(Function, member, parameters, arguments, unused) \
  &stalling::Function,
  const kernels::KernelSet stalling{
      kernel_->name, AlwaysSupported,
      CHUNKD_KERNEL_FUNCTIONS(CHUNKD_STALLING_OF, _)};
#undef CHUNKD_STALLING_OF
  const Bytes data = testing::RandomBytes(size_t{3} << 20, 31);
  size_t helped = 0;
  for (const NamedOptions& set : SmallOptionSets()) {
    if (set.options.algorithm == Algorithm::kFixed) continue;
    SCOPED_TRACE(set.name);
    const std::vector<Chunk> reference = ReferenceChunks(set.options, data);
    const size_t final_size = MakeCutter(set.options).value()->final_size();
    for (size_t threads : {size_t{2}, size_t{8}}) {
      for (size_t segment : {size_t{4096}, size_t{0}}) {
        EngineOptions engine = Engine(threads, segment, Strategy::kTwoStage, 1);
        engine.kernel = &stalling;
        absl::StatusOr<EnginePlan> plan = PlanEngine(set.options, engine);
        ASSERT_TRUE(plan.ok()) << plan.status();
        g_end_during_stall = 0;
        g_calls_during_stall = 0;
        ExpectFast(set.options, engine, data, reference);
        if (HasFatalFailure()) return;
        // The window is at least 64 KiB (kMinRoundBytes in engine.cc).
        const size_t ahead = final_size +
                             std::max<size_t>(plan->window_size, 65536) +
                             plan->segment_size;
        EXPECT_LE(g_end_during_stall.load(), 2 * ahead + 1024)
            << "threads " << threads << " segment " << plan->segment_size;
        EXPECT_LT(g_end_during_stall.load(), data.size());
        if (g_calls_during_stall.load() > 0) ++helped;
      }
    }
  }
  // Informational: how many runs had a helper working during the stall.
  RecordProperty("runs_with_help_during_stall", static_cast<int>(helped));
}

INSTANTIATE_TEST_SUITE_P(Kernels, EngineTest,
                         ::testing::ValuesIn(testing::KernelNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Options the engine rejects, and the plan it resolves.
TEST(EnginePlanTest, ValidatesEngineOptions) {
  const ChunkerOptions options = DefaultOptions(Algorithm::kFastCdc);
  EngineOptions engine;
  engine.kernel = &kernels::ScalarKernelSet();
  engine.segment_size = 63;
  EXPECT_EQ(PlanEngine(options, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  engine.segment_size = kMaxSegmentSize + 1;
  EXPECT_EQ(PlanEngine(options, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  engine.segment_size = 0;
  engine.window_size = kMaxWindowSize + 1;
  EXPECT_EQ(PlanEngine(options, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  engine.window_size = 0;
  engine.strategy = static_cast<Strategy>(7);
  EXPECT_EQ(PlanEngine(options, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  engine.strategy = Strategy::kAuto;
  ChunkerOptions bad = options;
  bad.min_size = 1;
  EXPECT_EQ(PlanEngine(bad, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FastChunks(bad, {}, engine).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StreamChunker::Create(bad, engine).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<EnginePlan> plan = PlanEngine(options, engine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kernel, "scalar");
  EXPECT_EQ(plan->parallelism, 1u);
  EXPECT_TRUE(plan->segment_auto);
  EXPECT_EQ(plan->window_size, size_t{2} << 20);
  EXPECT_EQ(plan->segment_size, size_t{2} << 20);
  EXPECT_NE(plan->strategy, Strategy::kAuto);

  ThreadPoolExecutor four(4);
  engine.executor = &four;
  engine.segment_size = size_t{1} << 20;
  plan = PlanEngine(options, engine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->parallelism, 4u);
  EXPECT_FALSE(plan->segment_auto);
  EXPECT_EQ(plan->segment_size, size_t{1} << 20);
  EXPECT_EQ(plan->window_size, size_t{4} << 20);
  EXPECT_EQ(plan->strategy, Strategy::kReference);
  // Automatic segments: the window per thread (1 MiB each with 4 threads).
  engine.segment_size = 0;
  plan = PlanEngine(options, engine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->segment_auto);
  EXPECT_EQ(plan->segment_size, size_t{1} << 20);

  // The automatic window stops growing at 8 MiB (a stream buffers one).
  ThreadPoolExecutor sixteen(16);
  engine.executor = &sixteen;
  plan = PlanEngine(options, engine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->window_size, size_t{8} << 20);
}

// The automatic choice follows the measured rule of engine.h.
TEST(EnginePlanTest, AutomaticStrategyFollowsTheMeasuredRule) {
  ThreadPoolExecutor two(2);
  const auto chosen = [&](Algorithm algorithm, const kernels::KernelSet* kernel,
                          Executor* executor) {
    EngineOptions engine;
    engine.kernel = kernel;
    engine.executor = executor;
    return PlanEngine(DefaultOptions(algorithm), engine).value().strategy;
  };
  for (const kernels::KernelSet* kernel : kernels::AllKernelSets()) {
    if (!kernel->supported()) continue;
    SCOPED_TRACE(kernel->name);
    const absl::string_view name = kernel->name;
    for (Executor* executor :
         {static_cast<Executor*>(nullptr), static_cast<Executor*>(&two)}) {
      EXPECT_EQ(chosen(Algorithm::kSeqCdc, kernel, executor),
                Strategy::kSequentialScan);
      EXPECT_EQ(chosen(Algorithm::kCrc32, kernel, executor),
                name == "scalar" ? Strategy::kReference : Strategy::kTwoStage);
      EXPECT_EQ(chosen(Algorithm::kFixed, kernel, executor),
                Strategy::kSequentialScan);
      EXPECT_EQ(chosen(Algorithm::kFastCdc, kernel, executor),
                Strategy::kReference);
      EXPECT_EQ(chosen(Algorithm::kRabin, kernel, executor),
                name == "scalar" ? Strategy::kReference : Strategy::kTwoStage);
      EXPECT_EQ(chosen(Algorithm::kBuzhash, kernel, executor),
                name == "scalar" ? Strategy::kReference
                                 : Strategy::kSequentialScan);
      EXPECT_EQ(chosen(Algorithm::kRepMaxCdc, kernel, executor),
                Strategy::kTwoStage);
      ChunkerOptions uniform = DefaultOptions(Algorithm::kRepMaxCdc);
      uniform.horizon_size = uniform.min_size - 1;
      EngineOptions engine;
      engine.kernel = kernel;
      engine.executor = executor;
      EXPECT_EQ(PlanEngine(uniform, engine).value().strategy,
                Strategy::kReference);
    }
  }
}

TEST(EnginePlanTest, StrategyNames) {
  for (Strategy s : {Strategy::kAuto, Strategy::kTwoStage,
                     Strategy::kSequentialScan, Strategy::kReference}) {
    absl::StatusOr<Strategy> parsed = ParseStrategy(StrategyName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(ParseStrategy("fast").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An unsupported kernel is an error, never a silent fallback.
TEST(EnginePlanTest, UnsupportedKernelIsAnError) {
  kernels::KernelSet fake = kernels::ScalarKernelSet();
  fake.name = "fake";
  fake.supported = [] { return false; };
  EngineOptions engine;
  engine.kernel = &fake;
  const ChunkerOptions options = DefaultOptions(Algorithm::kCrc32);
  EXPECT_EQ(PlanEngine(options, engine).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StreamChunker::Create(options, engine).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace chunkd::chunking
