#include "service/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "chunking/cutter.h"
#include "chunking/kernels/kernels.h"
#include "gtest/gtest.h"
#include "pipeline/worker_pool.h"

namespace chunkd::service {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// The chart's pod on this kind of machine: 2 cores, chunkd's malloc set-up.
MemoryInputs Inputs(std::optional<uint64_t> limit) {
  MemoryInputs in;
  in.limit = limit;
  in.threads = 2;
  in.arenas = 2;
  in.cores = 2;
  return in;
}

uint64_t Target(uint64_t limit) {
  return static_cast<uint64_t>(static_cast<double>(limit) * kLimitShare);
}

TEST(WindowBytesTest, OneMibPerThreadFromTwoToEight) {
  EXPECT_EQ(WindowBytes(1), 2 * kMiB);
  EXPECT_EQ(WindowBytes(2), 2 * kMiB);
  EXPECT_EQ(WindowBytes(5), 5 * kMiB);
  EXPECT_EQ(WindowBytes(8), 8 * kMiB);
  EXPECT_EQ(WindowBytes(64), 8 * kMiB);
}

// The window the engine uses on a pool of so many threads.
TEST(WindowBytesTest, TheEnginesOwn) {
  auto scalar = chunking::kernels::FindKernelSet("scalar");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  for (size_t threads : {1, 2, 5, 9}) {
    pipeline::WorkerPool pool(threads);
    chunking::EngineOptions engine;
    engine.kernel = *scalar;
    engine.executor = &pool;
    for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
      auto plan =
          chunking::PlanEngine(chunking::DefaultOptions(algorithm), engine);
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->window_size, WindowBytes(threads)) << threads;
    }
  }
}

StreamSettings Settings(uint64_t message = 4 * kMiB,
                        uint64_t inflight = 16 * kMiB, size_t threads = 2) {
  StreamSettings settings;
  settings.window = WindowBytes(threads);
  settings.max_message_bytes = message;
  settings.max_inflight_bytes = inflight;
  return settings;
}

chunking::ChunkerOptions Options(chunking::Algorithm algorithm,
                                 uint32_t min_size, uint32_t avg_size,
                                 uint32_t max_size) {
  chunking::ChunkerOptions o = chunking::DefaultOptions(algorithm);
  o.min_size = min_size;
  o.avg_size = avg_size;
  o.max_size = max_size;
  return o;
}

// The shape's sizes are the cutters' own, for every algorithm at its
// defaults and at the ends of its ranges.
TEST(ShapeOfTest, TheCuttersSizes) {
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const chunking::AlgorithmLimits& limits = chunking::LimitsFor(algorithm);
    std::vector<chunking::ChunkerOptions> all = {
        chunking::DefaultOptions(algorithm)};
    chunking::ChunkerOptions large = chunking::DefaultOptions(algorithm);
    large.min_size = static_cast<uint32_t>(limits.min_size.max);
    large.max_size = static_cast<uint32_t>(limits.max_size.max);
    large.avg_size = static_cast<uint32_t>(limits.avg_size.max);
    large.horizon_size = static_cast<uint32_t>(limits.horizon_size.max);
    all.push_back(large);
    for (const chunking::ChunkerOptions& o : all) {
      if (!chunking::ValidateOptions(o).ok()) continue;
      auto cutter = chunking::MakeCutter(o);
      ASSERT_TRUE(cutter.ok()) << cutter.status();
      const StreamShape shape = ShapeOf(o, false);
      const std::string what(chunking::AlgorithmName(algorithm));
      EXPECT_EQ(shape.final_size, (*cutter)->final_size()) << what;
      EXPECT_EQ(shape.max_size, (*cutter)->max_size()) << what;
      EXPECT_LE(shape.smallest_chunk, shape.max_size) << what;
    }
  }
  // fastcdc may cut min_size - 1 bytes when it is odd.
  EXPECT_EQ(ShapeOf(Options(chunking::Algorithm::kFastCdc, 4097, 16384,
                            65536), false)
                .smallest_chunk,
            4096u);
  EXPECT_EQ(ShapeOf(chunking::DefaultOptions(chunking::Algorithm::kFixed),
                    false)
                .smallest_chunk,
            16384u);
}

TEST(StreamMemoryBytesTest, TheLargestChunks) {
  // repmaxcdc at its largest: a 24 MiB final size. Twice (24 MiB + 256
  // bytes of context + a 2 MiB window + a 4 MiB message), two bitmaps of
  // 4 MiB (28 MiB of bits rounded up to 32), the chunks of one run (6 MiB
  // of chunks of 4 MiB), the records: 16 responses of 2 and 5 more queued,
  // 2 made by a task.
  chunking::ChunkerOptions o =
      chunking::DefaultOptions(chunking::Algorithm::kRepMaxCdc);
  o.min_size = 4 * kMiB;
  o.horizon_size = 16 * kMiB;
  const uint64_t bytes = StreamMemoryBytes(ShapeOf(o, false), Settings());
  EXPECT_EQ(bytes, 2 * (24 * kMiB + 256 + 6 * kMiB) + 8 * kMiB +
                       2 * 2 * sizeof(chunking::Chunk) +
                       (16 * 2 + 5) * kQueuedRecordBytes +
                       2 * kTaskRecordBytes);
  // Measured for these parameters: 59-63 MiB a stream with gRPC's buffers.
  EXPECT_GT(bytes + kGrpcBytesPerStream, 63 * kMiB);
}

TEST(StreamMemoryBytesTest, TheSmallestChunksForAClientThatDoesNotRead) {
  // fixed 64-byte chunks: 20 MiB of input in responses, 16 full responses,
  // a task's 8 MiB of records.
  const StreamShape shape =
      ShapeOf(Options(chunking::Algorithm::kFixed, 0, 64, 0), false);
  const uint64_t bytes = StreamMemoryBytes(shape, Settings());
  const uint64_t queued = (16 * 1024 + 20 * kMiB / 64) * kQueuedRecordBytes;
  const uint64_t task = 8 * kMiB / 64 * kTaskRecordBytes;
  EXPECT_EQ(bytes, 2 * (320 + 2 * kMiB + 1280) + 2 * kMiB +
                       2 * (6 * kMiB / 64) * sizeof(chunking::Chunk) + queued +
                       task);
  // Measured: up to 44 MiB a stream (4 MiB messages) with gRPC's buffers.
  EXPECT_GT(bytes + kGrpcBytesPerStream, 44 * kMiB);
}

TEST(StreamMemoryBytesTest, TheDefaultSizes) {
  const StreamSettings settings = Settings();
  const chunking::ChunkerOptions fastcdc =
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc);
  const uint64_t chunk = StreamMemoryBytes(ShapeOf(fastcdc, false), settings);
  const uint64_t dedup = StreamMemoryBytes(ShapeOf(fastcdc, true), settings);
  EXPECT_EQ(TypicalStreamMemoryBytes(settings), dedup);
  // A message of 4 MiB is cut where it lies: the buffer holds a window and
  // four bridges of 64 KiB; two bitmaps of 1 MiB.
  const uint64_t bridge = 64 * 1024 + 256;
  const uint64_t records = (16 * 1024 + 20 * kMiB / 4096) * kQueuedRecordBytes +
                           8 * kMiB / 4096 * kTaskRecordBytes;
  EXPECT_EQ(chunk, 2 * (bridge + 2 * kMiB + 4 * bridge) + 2 * kMiB +
                       2 * (6 * kMiB / 4096) * sizeof(chunking::Chunk) +
                       records);
  // The hint follower's copies: its held bytes with a bridged 128 KiB, and a
  // message more in the copy it hands back.
  EXPECT_EQ(dedup - chunk,
            2 * (bridge + 2 * (64 * 1024 + 64)) + bridge + 4 * kMiB);
  // A fraction of the largest: that is what lets many more run at once.
  EXPECT_LT(5 * dedup, LargestStreamMemoryBytes(settings));
}

TEST(StreamMemoryBytesTest, GrowsWithTheSizesAndShrinksWithTheSmallestChunk) {
  const StreamSettings settings = Settings();
  auto fastcdc = [&](uint32_t min, uint32_t max) {
    return StreamMemoryBytes(
        ShapeOf(Options(chunking::Algorithm::kFastCdc, min, min, max), false),
        settings);
  };
  EXPECT_LT(fastcdc(4096, 65536), fastcdc(4096, 1 << 20));
  EXPECT_LT(fastcdc(4096, 1 << 20), fastcdc(4096, 16 << 20));
  EXPECT_GT(fastcdc(64, 65536), fastcdc(4096, 65536));
  const StreamShape shape = ShapeOf(
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc), true);
  EXPECT_LT(StreamMemoryBytes(shape, Settings(kMiB)),
            StreamMemoryBytes(shape, Settings(4 * kMiB)));
  EXPECT_LT(StreamMemoryBytes(shape, Settings(4 * kMiB, 16 * kMiB, 2)),
            StreamMemoryBytes(shape, Settings(4 * kMiB, 16 * kMiB, 8)));
  EXPECT_LT(StreamMemoryBytes(shape, Settings(4 * kMiB, 16 * kMiB)),
            StreamMemoryBytes(shape, Settings(4 * kMiB, 64 * kMiB)));
}

// No valid parameters ask for more than LargestStreamMemoryBytes: random
// parameter sets of every algorithm, with and without hints for fastcdc.
TEST(StreamMemoryBytesTest, TheLargestBoundsEveryValidStream) {
  for (const StreamSettings& settings :
       {Settings(), Settings(kMiB, 4 * kMiB, 8), Settings(16 * kMiB, 64 * kMiB)}) {
    const uint64_t largest = LargestStreamMemoryBytes(settings);
    std::mt19937_64 random(42);
    int valid = 0;
    for (int i = 0; i < 20000; ++i) {
      const chunking::Algorithm algorithm =
          chunking::AllAlgorithms()[random() % chunking::AllAlgorithms().size()];
      const chunking::AlgorithmLimits& limits = chunking::LimitsFor(algorithm);
      // Log-uniform within a range, so that both ends are visited.
      auto pick = [&](const chunking::ParamRange& range) {
        const double lo = std::log2(static_cast<double>(std::max<uint64_t>(1, range.min)));
        const double hi = std::log2(static_cast<double>(std::max<uint64_t>(1, range.max)));
        const double x = lo + (hi - lo) * static_cast<double>(random() % 1001) / 1000;
        return static_cast<uint32_t>(std::clamp<uint64_t>(
            static_cast<uint64_t>(std::exp2(x)), range.min, range.max));
      };
      chunking::ChunkerOptions o = chunking::DefaultOptions(algorithm);
      o.min_size = pick(limits.min_size);
      o.avg_size = pick(limits.avg_size);
      o.max_size = pick(limits.max_size);
      o.horizon_size = pick(limits.horizon_size);
      if (limits.avg_power_of_two) {
        o.avg_size = uint32_t{1} << static_cast<int>(std::log2(o.avg_size));
      }
      if (!chunking::ValidateOptions(o).ok()) continue;
      ++valid;
      const bool hints = algorithm == chunking::Algorithm::kFastCdc;
      EXPECT_LE(StreamMemoryBytes(ShapeOf(o, hints), settings), largest)
          << chunking::AlgorithmName(algorithm) << " " << o.min_size << "/"
          << o.avg_size << "/" << o.max_size << "/" << o.horizon_size;
    }
    EXPECT_GT(valid, 2000);
  }
}

TEST(PlanMemoryTest, WithoutALimitTheDefaultsStay) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(std::nullopt));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_streams, 128u);
  EXPECT_EQ(plan->memory_budget, kGiB);
  EXPECT_EQ(plan->index_max_entries, 1342177u);  // half of 1 GiB at 400 B
  EXPECT_EQ(plan->hint_cache_mib, 64u);
  // Every stream at its largest: none ever waits for its stream memory.
  EXPECT_EQ(plan->stream_memory, 128 * LargestStreamMemoryBytes(Settings()));
  EXPECT_TRUE(plan->warnings.empty());
  // The bound is still computed and said.
  EXPECT_EQ(plan->costs.Total(),
            kBaseBytes + 2 * 16 * kMiB + 16 * kMiB + kGiB +
                128 * LargestStreamMemoryBytes(Settings()) +
                128 * kGrpcBytesPerStream +
                1342177 * kIndexEntryBytes +
                static_cast<uint64_t>(std::ceil(64 * kMiB * kHintCacheFactor)));
  EXPECT_NE(plan->summary.find("--max_streams 128, --memory_budget 1073741824, "
                               "--index_max_entries 1342177, "
                               "--hint_cache_mib 64, --stream_memory_budget "),
            std::string::npos)
      << plan->summary;
}

TEST(PlanMemoryTest, TheChartsOneGibPodFitsItsShareOfTheLimit) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(kGiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->costs.Total(), Target(kGiB));
  // Sized for typical streams (7 when each counted at the largest).
  EXPECT_GE(plan->max_streams, 20u);
  EXPECT_LT(plan->max_streams, 128u);
  // Two messages of budget per stream at least.
  EXPECT_GE(plan->memory_budget, 2 * plan->max_streams * 4 * kMiB);
  // Every stream typical at once, or the largest one.
  EXPECT_GE(plan->stream_memory,
            plan->max_streams * TypicalStreamMemoryBytes(Settings()));
  EXPECT_GE(plan->stream_memory, LargestStreamMemoryBytes(Settings()));
  EXPECT_NE(plan->summary.find("--stream_memory_budget " +
                               std::to_string(plan->stream_memory) +
                               " (sized)"),
            std::string::npos)
      << plan->summary;
  EXPECT_GT(plan->index_max_entries, 500000u);
  EXPECT_GT(plan->hint_cache_mib, 16u);
  EXPECT_LE(plan->hint_cache_mib, 64u);
  EXPECT_TRUE(plan->warnings.empty());
  EXPECT_NE(plan->summary.find(" (sized)"), std::string::npos);
  EXPECT_EQ(plan->summary.find(" (given)"), std::string::npos);
}

TEST(PlanMemoryTest, ARedisIndexLeavesItsShareToTheStreams) {
  MemoryInputs in = Inputs(kGiB);
  const MemoryPlan memory = *PlanMemory(in);
  in.memory_index = false;
  const MemoryPlan redis = *PlanMemory(in);
  EXPECT_EQ(redis.costs.index, 0u);
  EXPECT_GT(redis.max_streams, memory.max_streams);
  EXPECT_LE(redis.costs.Total(), Target(kGiB));
  EXPECT_NE(redis.summary.find("no memory index"), std::string::npos);
}

TEST(PlanMemoryTest, ARocksDbIndexCacheTakesTheMemoryIndexsShare) {
  MemoryInputs in = Inputs(kGiB);
  in.memory_index = false;
  in.rocksdb_index = true;
  const MemoryPlan sized = *PlanMemory(in);
  // A quarter of the room, the cache's overhead included.
  EXPECT_GE(sized.index_cache_mib, 100u);
  EXPECT_LE(sized.costs.index, Target(kGiB) / 4);
  EXPECT_EQ(sized.index_max_entries, 0u);
  EXPECT_LE(sized.costs.Total(), Target(kGiB));
  EXPECT_NE(sized.summary.find("--index_cache_mib"), std::string::npos);
  // Given, it is kept, and counted.
  in.index_cache_mib = 32;
  const MemoryPlan given = *PlanMemory(in);
  EXPECT_EQ(given.index_cache_mib, 32u);
  EXPECT_EQ(given.costs.index,
            static_cast<uint64_t>(32 * kMiB * kIndexCacheFactor) +
                kIndexCacheBaseBytes);
  EXPECT_GT(given.max_streams, sized.max_streams);
  // Without a limit, the default.
  MemoryInputs unlimited = Inputs(std::nullopt);
  unlimited.memory_index = false;
  unlimited.rocksdb_index = true;
  EXPECT_EQ(PlanMemory(unlimited)->index_cache_mib, kDefaultIndexCacheMib);
  // Its entries are on disk: no limit unless one is given.
  EXPECT_EQ(PlanMemory(unlimited)->index_max_entries, 0u);
}

TEST(PlanMemoryTest, EveryLimitThatHoldsAStreamIsKept) {
  for (uint64_t limit = 192 * kMiB; limit <= 256 * kGiB; limit += limit / 3) {
    for (size_t threads : {1, 2, 8, 64}) {
      for (uint64_t message : {kMiB, 4 * kMiB, 16 * kMiB}) {
        for (bool memory_index : {true, false}) {
          MemoryInputs in = Inputs(limit);
          in.threads = threads;
          in.arenas = threads;
          in.max_message_bytes = message;
          in.max_inflight_bytes = 4 * message;
          in.memory_index = memory_index;
          absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
          const std::string what = absl::StrCat(
              limit, " bytes, ", threads, " threads, messages of ", message,
              memory_index ? ", memory index" : ", redis");
          if (!plan.ok()) {
            // Only a limit too small for one stream is refused.
            EXPECT_NE(plan.status().message().find("leaves no room for one"),
                      std::string::npos)
                << what << ": " << plan.status();
            EXPECT_LT(limit, 2 * kGiB) << what;
            continue;
          }
          EXPECT_LE(plan->costs.Total(), Target(limit)) << what;
          EXPECT_GE(plan->max_streams, 1u) << what;
          EXPECT_LE(plan->max_streams, 128u) << what;
          EXPECT_GE(plan->memory_budget, plan->max_streams * message) << what;
          EXPECT_GE(plan->stream_memory,
                    plan->max_streams * plan->costs.typical_stream)
              << what;
          // Only a limit too small for the largest stream warns that it
          // refuses it.
          EXPECT_EQ(plan->warnings.empty(),
                    plan->stream_memory >= plan->costs.largest_stream)
              << what;
          if (limit >= kGiB) {
            EXPECT_TRUE(plan->warnings.empty()) << what;
          }
        }
      }
    }
  }
}

TEST(PlanMemoryTest, ALargeLimitGivesTheDefaultsBack) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(64 * kGiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_streams, 128u);
  EXPECT_EQ(plan->hint_cache_mib, 64u);
  EXPECT_EQ(plan->memory_budget, kGiB);
  EXPECT_LE(plan->costs.Total(), Target(64 * kGiB));
}

TEST(PlanMemoryTest, MoreThreadsMeanWiderWindowsAndFewerStreams) {
  MemoryInputs in = Inputs(4 * kGiB);
  const MemoryPlan two = *PlanMemory(in);
  in.threads = 16;
  const MemoryPlan sixteen = *PlanMemory(in);
  EXPECT_LT(sixteen.max_streams, two.max_streams);
  // glibc's own arenas (GLIBC_TUNABLES set): eight per core, left alone.
  in.threads = 2;
  in.arenas = 0;
  in.cores = 4;
  EXPECT_EQ(PlanMemory(in)->costs.allocator, 32 * 16 * kMiB);
  EXPECT_EQ(PlanMemory(in)->arenas, 0u);
}

TEST(PlanMemoryTest, ManyCoresGetAtMostEightArenasUnderALimit) {
  MemoryInputs in = Inputs(kGiB);
  in.threads = 64;
  in.arenas = 64;
  in.cores = 64;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->arenas, kMaxArenasUnderLimit);
  EXPECT_EQ(plan->costs.allocator, kMaxArenasUnderLimit * 16 * kMiB);
  EXPECT_LE(plan->costs.Total(), Target(kGiB));
  EXPECT_NE(plan->summary.find("allocator 128 MiB for 8 arenas"),
            std::string::npos)
      << plan->summary;
  // Without a limit, one per core as ever.
  in.limit = std::nullopt;
  EXPECT_EQ(PlanMemory(in)->arenas, 64u);
}

TEST(PlanMemoryTest, GivenFlagsWinAndAreSaidToPassTheLimit) {
  MemoryInputs in = Inputs(kGiB);
  in.max_streams = 128;
  in.memory_budget = kGiB;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_streams, 128u);
  EXPECT_EQ(plan->memory_budget, kGiB);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("the flags given put resident memory at "
                                   "up to "),
            std::string::npos)
      << plan->warnings[0];
  EXPECT_NE(plan->warnings[0].find("above 85 % of the memory limit of 1024 "
                                   "MiB (870 MiB)"),
            std::string::npos)
      << plan->warnings[0];
  EXPECT_NE(plan->summary.find("--max_streams 128 (given), --memory_budget "
                               "1073741824 (given)"),
            std::string::npos)
      << plan->summary;
}

TEST(PlanMemoryTest, GivenFlagsThatFitNeedNoWarning) {
  MemoryInputs in = Inputs(4 * kGiB);
  in.max_streams = 8;
  in.hint_cache_mib = 0;
  in.index_max_entries = 100000;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_streams, 8u);
  EXPECT_EQ(plan->hint_cache_mib, 0u);
  EXPECT_EQ(plan->index_max_entries, 100000u);
  // The budget is sized to what is left, within what 8 streams can hold.
  EXPECT_EQ(plan->memory_budget, 8 * (16 + 4) * kMiB);
  EXPECT_TRUE(plan->warnings.empty());
  EXPECT_LE(plan->costs.Total(), Target(4 * kGiB));
}

TEST(PlanMemoryTest, AGivenBudgetSizesTheStreamsBesideIt) {
  MemoryInputs in = Inputs(kGiB);
  in.memory_budget = 64 * kMiB;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->memory_budget, 64 * kMiB);
  EXPECT_GE(plan->max_streams, 1u);
  EXPECT_LE(plan->max_streams, 16u);  // a message of budget each
  EXPECT_LE(plan->costs.Total(), Target(kGiB));
  // A budget below one message stops start-up, naming the flags.
  in.memory_budget = kMiB;
  plan = PlanMemory(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(
                "--memory_budget 1048576 must be at least --max_streams (1) x "
                "--max_message_bytes (4194304)"),
            std::string::npos)
      << plan.status();
}

TEST(PlanMemoryTest, AnUnlimitedIndexUnderALimitIsWarnedAbout) {
  MemoryInputs in = Inputs(kGiB);
  in.index_max_entries = 0;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->costs.unbounded_index);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("--index_max_entries 0 lets the memory "
                                   "index grow without bound"),
            std::string::npos);
  EXPECT_NE(plan->summary.find("resident memory at most unbounded"),
            std::string::npos);
  // With a Redis index the flag means nothing here.
  in.memory_index = false;
  EXPECT_TRUE(PlanMemory(in)->warnings.empty());
}

TEST(PlanMemoryTest, ASmallLimitServesTypicalStreamsButNotTheLargest) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(256 * kMiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->max_streams, 1u);
  EXPECT_LE(plan->costs.Total(), Target(256 * kMiB));
  EXPECT_GE(plan->stream_memory,
            plan->max_streams * TypicalStreamMemoryBytes(Settings()));
  EXPECT_LT(plan->stream_memory, LargestStreamMemoryBytes(Settings()));
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find(
                absl::StrCat("--stream_memory_budget ", plan->stream_memory,
                             " is below the largest stream's memory")),
            std::string::npos)
      << plan->warnings[0];
}

TEST(PlanMemoryTest, AGivenStreamMemoryIsKept) {
  MemoryInputs in = Inputs(kGiB);
  in.stream_memory = 200 * kMiB;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stream_memory, 200 * kMiB);
  // Typical streams in it, all at once.
  EXPECT_EQ(plan->max_streams,
            200 * kMiB / TypicalStreamMemoryBytes(Settings()));
  EXPECT_LE(plan->costs.Total(), Target(kGiB));
  EXPECT_TRUE(plan->warnings.empty());
  EXPECT_NE(plan->summary.find("--stream_memory_budget 209715200 (given)"),
            std::string::npos)
      << plan->summary;
  // Below the largest stream: kept, with a warning that it is refused.
  in.stream_memory = 100 * kMiB;
  plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stream_memory, 100 * kMiB);
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_NE(plan->warnings[0].find("streams whose parameters need more than "
                                   "it are refused"),
            std::string::npos)
      << plan->warnings[0];
  // Without a limit too.
  in.limit = std::nullopt;
  plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->stream_memory, 100 * kMiB);
  EXPECT_EQ(plan->max_streams, 128u);
}

TEST(PlanMemoryTest, ALimitTooSmallForOneStreamIsRefused) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(128 * kMiB));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find(
                "the memory limit of 128 MiB leaves no room for one stream"),
            std::string::npos)
      << plan.status();
  // Given explicitly, the flags are taken as they are, with a warning.
  MemoryInputs in = Inputs(128 * kMiB);
  in.max_streams = 1;
  in.memory_budget = 4 * kMiB;
  plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->warnings.size(), 1u);
}

TEST(PlanMemoryTest, ImpossibleFlagsStopStartUp) {
  MemoryInputs in = Inputs(std::nullopt);
  in.max_streams = 0;
  EXPECT_EQ(PlanMemory(in).status().message(),
            "--max_streams must be at least 1");
  in = Inputs(std::nullopt);
  in.max_streams = 100;
  in.memory_budget = 1000000;
  EXPECT_EQ(PlanMemory(in).status().message(),
            "--memory_budget 1000000 must be at least --max_streams (100) x "
            "--max_message_bytes (4194304) = 419430400; raise it, or lower "
            "one of the others");
  // Without a limit a small budget alone keeps 128 streams, as before.
  in = Inputs(std::nullopt);
  in.memory_budget = 64 * kMiB;
  EXPECT_NE(PlanMemory(in).status().message().find("--max_streams (128)"),
            std::string::npos);
  in = Inputs(std::nullopt);
  in.index_max_entries = -2;
  EXPECT_NE(PlanMemory(in).status().message().find(
                "--index_max_entries -2 must be -1"),
            std::string::npos);
}

TEST(EstimateMemoryTest, ChunkersSizeCountsAndEntries) {
  const StreamSettings settings;
  const StreamShape fastcdc = ShapeOf(
      chunking::DefaultOptions(chunking::Algorithm::kFastCdc), false);
  const StreamShape fixed =
      ShapeOf(chunking::DefaultOptions(chunking::Algorithm::kFixed), false);
  const uint64_t one = EstimateMemoryBytes({fastcdc}, 100, 0, settings);
  // A set's chunker, without Dedup's hints and records, and its sizes.
  EXPECT_EQ(one, ChunkerMemoryBytes(fastcdc, settings) +
                     fastcdc.max_size * kEstimateSizeCountBytes);
  EXPECT_LT(ChunkerMemoryBytes(fastcdc, settings),
            StreamMemoryBytes(fastcdc, settings));
  // Sets add up; entries cost what they are said to.
  EXPECT_EQ(EstimateMemoryBytes({fastcdc, fixed}, 100, 0, settings),
            one + EstimateMemoryBytes({fixed}, 100, 0, settings));
  EXPECT_EQ(EstimateMemoryBytes({fastcdc}, 100, 1000, settings),
            one + 100 * 1000);
  // The default limit: an estimate of a few typical sets reserves no more
  // than the largest Chunk or Dedup stream.
  const uint64_t entries = DefaultEstimateMaxEntries(settings);
  EXPECT_GT(entries, uint64_t{100000});
  EXPECT_LE(EstimateMemoryBytes({fastcdc, fastcdc, fixed, fixed},
                                kEstimateEntryBytesSha256, entries, settings),
            LargestStreamMemoryBytes(settings));
}

TEST(EstimateMemoryTest, TheFlagIsSizedUnlessGiven) {
  MemoryInputs in = Inputs(std::nullopt);
  auto plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok());
  StreamSettings settings;
  settings.window = WindowBytes(in.threads);
  EXPECT_EQ(plan->estimate_max_entries, DefaultEstimateMaxEntries(settings));
  in.estimate_max_entries = -1;
  EXPECT_EQ(PlanMemory(in)->estimate_max_entries,
            DefaultEstimateMaxEntries(settings));
  in.estimate_max_entries = 0;
  EXPECT_EQ(PlanMemory(in)->estimate_max_entries, 0u);
  in.estimate_max_entries = 77;
  EXPECT_EQ(PlanMemory(in)->estimate_max_entries, 77u);
  in.estimate_max_entries = -2;
  EXPECT_NE(PlanMemory(in).status().message().find(
                "--estimate_max_entries -2 must be -1"),
            std::string::npos);
}

}  // namespace
}  // namespace chunkd::service
