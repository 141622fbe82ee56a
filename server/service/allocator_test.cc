#include "service/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace chunkd::service {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);
constexpr absl::Duration kIdle = absl::Seconds(1);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST(TunablesSetMallocTest, FindsAMallocTunableAnywhereInTheList) {
  EXPECT_FALSE(TunablesSetMalloc(nullptr));
  EXPECT_FALSE(TunablesSetMalloc(""));
  EXPECT_FALSE(TunablesSetMalloc("glibc.pthread.rseq=0"));
  EXPECT_FALSE(TunablesSetMalloc("glibc.mallocx=1"));
  EXPECT_TRUE(TunablesSetMalloc("glibc.malloc.trim_threshold=1073741824"));
  EXPECT_TRUE(TunablesSetMalloc(
      "glibc.pthread.rseq=0:glibc.malloc.mmap_threshold=268435456"));
}

TEST(IdleTrimPolicyTest, NothingHappenedNothingToTrim) {
  IdleTrimPolicy policy(kIdle);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(policy.Observe(At(i), {0, 0})) << i;
  }
}

TEST(IdleTrimPolicyTest, TrimsOnceAfterTheStreamsStopAndTheDelayPasses) {
  IdleTrimPolicy policy(kIdle);
  EXPECT_FALSE(policy.Observe(At(0), {0, 0}));
  EXPECT_FALSE(policy.Observe(At(0.25), {3, 3}));
  EXPECT_FALSE(policy.Observe(At(0.5), {1, 4}));
  // Quiet from 0.75 on: trimmed a full second after the last activity.
  EXPECT_FALSE(policy.Observe(At(0.75), {0, 4}));
  EXPECT_FALSE(policy.Observe(At(1.0), {0, 4}));
  EXPECT_FALSE(policy.Observe(At(1.25), {0, 4}));
  EXPECT_TRUE(policy.Observe(At(1.5), {0, 4}));
  // Idle from then on: never again.
  for (int i = 2; i < 100; ++i) {
    EXPECT_FALSE(policy.Observe(At(i), {0, 4})) << i;
  }
}

TEST(IdleTrimPolicyTest, NeverTrimsWhileAStreamRuns) {
  IdleTrimPolicy policy(kIdle);
  // One long stream: hours of activity, no trim.
  for (int i = 0; i <= 10000; ++i) {
    EXPECT_FALSE(policy.Observe(At(i), {1, 1})) << i;
  }
  EXPECT_FALSE(policy.Observe(At(10000.5), {0, 1}));
  EXPECT_TRUE(policy.Observe(At(10001), {0, 1}));
}

TEST(IdleTrimPolicyTest, AStreamBetweenTwoLooksCountsAsActivity) {
  IdleTrimPolicy policy(kIdle);
  EXPECT_FALSE(policy.Observe(At(0), {0, 0}));
  // Started and ended between looks: seen only in the counter.
  EXPECT_FALSE(policy.Observe(At(1), {0, 1}));
  EXPECT_FALSE(policy.Observe(At(1.5), {0, 1}));
  EXPECT_TRUE(policy.Observe(At(2), {0, 1}));
  EXPECT_FALSE(policy.Observe(At(3), {0, 1}));
}

TEST(IdleTrimPolicyTest, ActivityDuringTheDelayRestartsIt) {
  IdleTrimPolicy policy(kIdle);
  EXPECT_FALSE(policy.Observe(At(0), {2, 2}));
  EXPECT_FALSE(policy.Observe(At(0.5), {0, 2}));
  EXPECT_FALSE(policy.Observe(At(0.9), {0, 2}));
  EXPECT_FALSE(policy.Observe(At(0.95), {0, 3}));  // another short stream
  EXPECT_FALSE(policy.Observe(At(1.5), {0, 3}));
  EXPECT_FALSE(policy.Observe(At(1.9), {0, 3}));
  EXPECT_TRUE(policy.Observe(At(1.95), {0, 3}));
}

TEST(IdleTrimPolicyTest, EachBurstGetsItsOwnTrim) {
  IdleTrimPolicy policy(kIdle);
  int trims = 0;
  double t = 0;
  for (int burst = 0; burst < 5; ++burst) {
    for (int i = 0; i < 4; ++i, t += 0.25) {
      trims += policy.Observe(At(t), {1, static_cast<uint64_t>(burst + 1)});
    }
    EXPECT_EQ(trims, burst) << "no trim while streams run";
    for (int i = 0; i < 20; ++i, t += 0.25) {
      trims += policy.Observe(At(t), {0, static_cast<uint64_t>(burst + 1)});
    }
    EXPECT_EQ(trims, burst + 1);
  }
}

// A fake stream count that the test changes while the trimmer's thread
// looks at it.
class FakeService {
 public:
  StreamActivity activity() {
    std::lock_guard<std::mutex> lock(mu_);
    ++looks_;
    return activity_;
  }
  void Set(size_t active, uint64_t started) {
    std::lock_guard<std::mutex> lock(mu_);
    activity_ = {active, started};
  }
  int looks() {
    std::lock_guard<std::mutex> lock(mu_);
    return looks_;
  }
  // Waits (bounded) until the trimmer has looked `n` more times.
  bool WaitForLooks(int n) {
    const int target = looks() + n;
    for (int i = 0; i < 4000; ++i) {
      if (looks() >= target) return true;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return false;
  }

 private:
  std::mutex mu_;
  StreamActivity activity_;
  int looks_ = 0;
};

TEST(IdleTrimmerTest, TrimsOnItsThreadOnlyAfterStreamsStop) {
  FakeService service;
  std::atomic<int> trims{0};
  IdleTrimmer trimmer({absl::Milliseconds(1), absl::Milliseconds(20)},
                      [&] { return service.activity(); }, [&] { ++trims; });
  trimmer.Start();
  ASSERT_TRUE(service.WaitForLooks(30));
  EXPECT_EQ(trims, 0) << "trimmed before any stream ran";

  service.Set(2, 2);
  ASSERT_TRUE(service.WaitForLooks(60));  // far past the idle delay
  EXPECT_EQ(trims, 0) << "trimmed while streams ran";

  service.Set(0, 2);
  for (int i = 0; i < 4000 && trims == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(trims, 1);
  ASSERT_TRUE(service.WaitForLooks(60));
  EXPECT_EQ(trims, 1) << "trimmed again while idle";
  trimmer.Stop();
  trimmer.Stop();  // idempotent
  const int looks = service.looks();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(service.looks(), looks) << "looked after Stop()";
}

TEST(IdleTrimmerTest, StopEndsAWaitAtOnce) {
  FakeService service;
  IdleTrimmer trimmer({absl::Hours(1), absl::Seconds(1)},
                      [&] { return service.activity(); }, [] {});
  trimmer.Start();
  trimmer.Stop();  // would hang for an hour if the wait ignored it
  EXPECT_EQ(service.looks(), 0);
}

#if defined(__GLIBC__)
// Allocator state is process-wide, so this runs in a child process.
TEST(ConfigureMallocTest, ConfiguresGlibcUnlessTheUserDid) {
  EXPECT_EXIT(
      {
        const MallocSetup setup = ConfigureMalloc(nullptr);
        if (!setup.configured) std::_Exit(1);
        if (setup.mmap_threshold != kMmapThreshold) std::_Exit(2);
        if (setup.arena_max !=
            std::max(1u, std::thread::hardware_concurrency())) {
          std::_Exit(4);
        }
        // Half our threshold, far above glibc's default of 128 KiB, now
        // comes from the heap, not from mmap.
        void* volatile block = std::malloc(kMmapThreshold / 2);
        const size_t mapped = mallinfo2().hblkhd;
        std::free(block);
        std::_Exit(mapped == 0 ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
  const MallocSetup left_alone =
      ConfigureMalloc("glibc.malloc.trim_threshold=1073741824");
  EXPECT_FALSE(left_alone.configured);
  EXPECT_NE(left_alone.description.find("GLIBC_TUNABLES"), std::string::npos)
      << left_alone.description;
}

TEST(ConfigureMallocTest, WithoutItALargeBlockIsMapped) {
  // The check above can fail: glibc's default maps a block this large.
  EXPECT_EXIT(
      {
        void* volatile block = std::malloc(kMmapThreshold / 2);
        const size_t mapped = mallinfo2().hblkhd;
        std::free(block);
        std::_Exit(mapped > 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
#endif

}  // namespace
}  // namespace chunkd::service
