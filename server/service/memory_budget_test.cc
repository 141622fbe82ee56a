#include "service/memory_budget.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::service {
namespace {

TEST(MemoryBudgetTest, ReservesWhileItFits) {
  MemoryBudget budget(100);
  int woken = 0;
  EXPECT_TRUE(budget.ReserveOrWait(60, [&] { ++woken; }));
  EXPECT_TRUE(budget.ReserveOrWait(40, [&] { ++woken; }));
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_FALSE(budget.ReserveOrWait(1, [&] { ++woken; }));
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_EQ(budget.waiting(), 1u);
  EXPECT_EQ(woken, 0);
}

TEST(MemoryBudgetTest, ReleaseWakesEveryWaiterOnce) {
  MemoryBudget budget(10);
  ASSERT_TRUE(budget.ReserveOrWait(10, [] {}));
  int woken = 0;
  EXPECT_FALSE(budget.ReserveOrWait(5, [&] { ++woken; }));
  EXPECT_FALSE(budget.ReserveOrWait(8, [&] { ++woken; }));
  budget.Release(4);
  EXPECT_EQ(woken, 2);
  EXPECT_EQ(budget.waiting(), 0u);
  EXPECT_EQ(budget.used(), 6u);
  budget.Release(6);
  EXPECT_EQ(woken, 2);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(MemoryBudgetTest, ReservationLargerThanTheLimitNeverFits) {
  MemoryBudget budget(10);
  EXPECT_FALSE(budget.ReserveOrWait(11, [] {}));
  EXPECT_EQ(budget.used(), 0u);
}

// Racing reservations never push used bytes past the limit, and a waiter
// that retries after its wake-up eventually gets through.
TEST(MemoryBudgetTest, RacingThreadsStayWithinTheLimit) {
  MemoryBudget budget(1000);
  std::atomic<size_t> peak{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        std::atomic<bool> woke{false};
        while (!budget.ReserveOrWait(300, [&woke] { woke = true; })) {
          while (!woke) std::this_thread::yield();
          woke = false;
        }
        size_t used = budget.used();
        size_t seen = peak.load();
        while (used > seen && !peak.compare_exchange_weak(seen, used)) {
        }
        budget.Release(300);
      }
      ++done;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 4);
  EXPECT_LE(peak.load(), 1000u);
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace chunkd::service
