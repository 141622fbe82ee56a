// The Executor contract: every index runs exactly once, the caller takes
// part, and the caller never waits for helper tasks that have not started —
// so a ParallelFor issued from a pool task cannot deadlock its own pool.
#include "chunking/executor.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::chunking {
namespace {

TEST(ExecutorTest, EveryIndexRunsOnce) {
  for (size_t parallelism : {1, 2, 3, 8}) {
    ThreadPoolExecutor executor(parallelism);
    EXPECT_EQ(executor.parallelism(), parallelism);
    for (size_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      executor.ParallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(hits[i].load(), 1)
            << "parallelism " << parallelism << " n " << n << " index " << i;
      }
    }
  }
}

TEST(ExecutorTest, RunParallelWithoutExecutorRunsInline) {
  const std::thread::id caller = std::this_thread::get_id();
  int count = 0;
  RunParallel(nullptr, 5, [&](size_t) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++count;
  });
  EXPECT_EQ(count, 5);
}

TEST(ExecutorTest, UsesSeveralThreads) {
  ThreadPoolExecutor executor(3);
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  executor.ParallelFor(3, [&](size_t) {
    const int now = inside.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Wait (bounded: 10 s at least) until two indices have run side by side.
    for (int spin = 0; spin < 20000 && most.load() < 2; ++spin) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    inside.fetch_sub(1);
  });
  EXPECT_GE(most.load(), 2);
}

// Helpers that are never run while the call is in progress: the caller does
// all the work, and running them afterwards is harmless.
TEST(ExecutorTest, CallerDoesNotWaitForQueuedHelpers) {
  std::vector<std::function<void()>> parked;
  std::vector<int> hits(100, 0);
  ParallelForWithHelpers(
      hits.size(), 7, [&](size_t i) { ++hits[i]; },
      [&](std::function<void()> task) { parked.push_back(std::move(task)); });
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_EQ(parked.size(), 7u);
  for (auto& task : parked) task();  // late helpers find nothing to claim
  for (int h : hits) EXPECT_EQ(h, 1);
}

// StreamChunker runs inside a pool task in the service; its ParallelFor on
// the same pool must finish even when every pool thread is that task.
TEST(ExecutorTest, NestedInsideTheOnlyPoolThread) {
  ThreadPoolExecutor executor(2);  // one pool thread
  std::atomic<int> total{0};
  std::atomic<bool> done{false};
  executor.ParallelFor(2, [&](size_t outer) {
    executor.ParallelFor(50, [&](size_t) { total.fetch_add(1); });
    if (outer == 1) done = true;
  });
  EXPECT_EQ(total.load(), 100);
  EXPECT_TRUE(done.load());
}

// The spin follows the short waits between tasks: it shrinks to kMinSpin
// while tasks come at once, ignores a gap longer than kMaxSpin, and grows
// again after waits it could have caught, however late the worker woke.
TEST(IdleSpinTest, BudgetFollowsTheShortWaits) {
  IdleSpin spin;
  EXPECT_EQ(spin.budget(), IdleSpin::kMaxSpin);
  const std::atomic<bool> resting{false};
  std::atomic<size_t> queued{1};  // a task is always there: no spinning
  // Bounded; a preempted round may delay it (a load-free run takes ~20).
  for (int i = 0; i < 1000 && spin.budget() > IdleSpin::kMinSpin; ++i) {
    spin.Spin(queued, resting);
    spin.TookTask(std::chrono::steady_clock::now());
  }
  EXPECT_EQ(spin.budget(), IdleSpin::kMinSpin);
  spin.Spin(queued, resting);
  std::this_thread::sleep_for(2 * IdleSpin::kMaxSpin);
  spin.TookTask(std::chrono::steady_clock::now());
  EXPECT_EQ(spin.budget(), IdleSpin::kMinSpin) << "a gap teaches nothing";
  // Tasks queued 40 us into the wait, taken after a late wake-up: the wait
  // counts up to the queueing, so the spin grows to catch such tasks.
  for (int i = 0; i < 100 && spin.budget() == IdleSpin::kMinSpin; ++i) {
    const auto idle = std::chrono::steady_clock::now();
    spin.Spin(queued, resting);
    std::this_thread::sleep_for(2 * IdleSpin::kMaxSpin);
    spin.TookTask(idle + IdleSpin::kMaxSpin * 2 / 5);
  }
  EXPECT_GT(spin.budget(), IdleSpin::kMinSpin);
}

// With nothing queued the spin gives up after its budget.
TEST(IdleSpinTest, SpinEndsAfterItsBudget) {
  IdleSpin spin;
  const std::atomic<bool> resting{false};
  std::atomic<size_t> queued{0};
  const auto start = std::chrono::steady_clock::now();
  spin.Spin(queued, resting);
  EXPECT_GE(std::chrono::steady_clock::now() - start, spin.budget());
}

// Executor::Rest() stops the spin at once (a worker that would spin through
// the caller's index round trip sleeps instead).
TEST(IdleSpinTest, SpinStopsWhenResting) {
  IdleSpin spin;
  const std::atomic<bool> resting{true};
  std::atomic<size_t> queued{0};
  // Bounded retries: a preempted try may take longer than the budget.
  bool stopped_early = false;
  for (int i = 0; i < 20 && !stopped_early; ++i) {
    const auto start = std::chrono::steady_clock::now();
    spin.Spin(queued, resting);
    stopped_early =
        std::chrono::steady_clock::now() - start < spin.budget() / 2;
  }
  EXPECT_TRUE(stopped_early);
}

}  // namespace
}  // namespace chunkd::chunking
