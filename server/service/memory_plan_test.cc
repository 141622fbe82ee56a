#include "service/memory_plan.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

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

TEST(PerStreamBytesTest, TheLargestChunksAtTheDefaults) {
  // Twice (24 MiB repmaxcdc final size + 256 bytes of context + a 2 MiB
  // window + a 4 MiB message), bitmaps of 28 MiB, gRPC's 2 MiB.
  const uint64_t final_size = 24 * kMiB + 256;
  EXPECT_EQ(PerStreamBytes(4 * kMiB, 16 * kMiB, 2),
            2 * (final_size + 6 * kMiB) + (final_size + 4 * kMiB) / 8 +
                2 * kMiB);
  // Measured for repmaxcdc's largest parameters: 59-63 MiB a stream.
  EXPECT_GT(PerStreamBytes(4 * kMiB, 16 * kMiB, 2), 63 * kMiB);
}

TEST(PerStreamBytesTest, TheSmallestChunksWhenInflightIsLarge) {
  // 2 x (2 + 4) MiB of chunker, 2 x (64 + 4) MiB of responses, gRPC's 2.
  EXPECT_EQ(PerStreamBytes(4 * kMiB, 64 * kMiB, 2),
            12 * kMiB + 136 * kMiB + 2 * kMiB);
}

TEST(PerStreamBytesTest, GrowsWithTheMessageAndTheWindow) {
  EXPECT_LT(PerStreamBytes(1 * kMiB, 16 * kMiB, 2),
            PerStreamBytes(4 * kMiB, 16 * kMiB, 2));
  EXPECT_LT(PerStreamBytes(4 * kMiB, 16 * kMiB, 2),
            PerStreamBytes(4 * kMiB, 16 * kMiB, 8));
  EXPECT_EQ(PerStreamBytes(4 * kMiB, 16 * kMiB, 8),
            PerStreamBytes(4 * kMiB, 16 * kMiB, 96));
}

TEST(PlanMemoryTest, WithoutALimitTheDefaultsStay) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(std::nullopt));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_streams, 128u);
  EXPECT_EQ(plan->memory_budget, kGiB);
  EXPECT_EQ(plan->index_max_entries, 1342177u);  // half of 1 GiB at 400 B
  EXPECT_EQ(plan->hint_cache_mib, 64u);
  EXPECT_TRUE(plan->warnings.empty());
  // The bound is still computed and said.
  EXPECT_EQ(plan->costs.Total(),
            kBaseBytes + 2 * 16 * kMiB + 16 * kMiB + kGiB +
                128 * PerStreamBytes(4 * kMiB, 16 * kMiB, 2) +
                1342177 * kIndexEntryBytes +
                static_cast<uint64_t>(std::ceil(64 * kMiB * kHintCacheFactor)));
  EXPECT_NE(plan->summary.find("--max_streams 128, --memory_budget 1073741824, "
                               "--index_max_entries 1342177, "
                               "--hint_cache_mib 64; resident memory at most"),
            std::string::npos)
      << plan->summary;
}

TEST(PlanMemoryTest, TheChartsOneGibPodFitsItsShareOfTheLimit) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(kGiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LE(plan->costs.Total(), Target(kGiB));
  EXPECT_GE(plan->max_streams, 4u);
  EXPECT_LT(plan->max_streams, 128u);
  // Two messages of budget per stream at least.
  EXPECT_GE(plan->memory_budget, 2 * plan->max_streams * 4 * kMiB);
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
          EXPECT_TRUE(plan->warnings.empty()) << what;
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

}  // namespace
}  // namespace chunkd::service
