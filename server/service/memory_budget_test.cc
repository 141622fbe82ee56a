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

using Outcome = FairBudget::Outcome;

TEST(FairBudgetTest, GrantsWhileItFitsThenQueues) {
  FairBudget budget(100);
  uint64_t ticket = 0;
  int granted = 0;
  EXPECT_EQ(budget.Reserve(60, [&] { ++granted; }, &ticket), Outcome::kGranted);
  EXPECT_EQ(budget.Reserve(40, [&] { ++granted; }, &ticket), Outcome::kGranted);
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_EQ(budget.Reserve(1, [&] { ++granted; }, &ticket), Outcome::kQueued);
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_EQ(budget.waiting(), 1u);
  EXPECT_EQ(budget.waiting_bytes(), 1u);
  EXPECT_EQ(granted, 0);
  budget.Release(40);
  EXPECT_EQ(granted, 1);
  EXPECT_EQ(budget.used(), 61u);
  EXPECT_EQ(budget.waiting(), 0u);
}

TEST(FairBudgetTest, ALargeReservationIsNotOvertakenBySmallOnes) {
  FairBudget budget(100);
  uint64_t ticket = 0;
  std::vector<int> order;
  ASSERT_EQ(budget.Reserve(90, [] {}, &ticket), Outcome::kGranted);
  EXPECT_EQ(budget.Reserve(50, [&] { order.push_back(50); }, &ticket),
            Outcome::kQueued);
  // Fits the 10 bytes left, but waits behind the 50.
  EXPECT_EQ(budget.Reserve(10, [&] { order.push_back(10); }, &ticket),
            Outcome::kQueued);
  EXPECT_EQ(budget.used(), 90u);
  budget.Release(30);  // 60 used: 50 does not fit yet, nor may 10 pass it
  EXPECT_TRUE(order.empty());
  budget.Release(60);  // 0 used: both, in order
  EXPECT_EQ(order, (std::vector<int>{50, 10}));
  EXPECT_EQ(budget.used(), 60u);
}

TEST(FairBudgetTest, CancellingTheHeadLetsTheNextOnesIn) {
  FairBudget budget(100);
  uint64_t head = 0, next = 0;
  int granted = 0;
  ASSERT_EQ(budget.Reserve(90, [] {}, &head), Outcome::kGranted);
  ASSERT_EQ(budget.Reserve(80, [&] { granted += 80; }, &head),
            Outcome::kQueued);
  ASSERT_EQ(budget.Reserve(10, [&] { granted += 10; }, &next),
            Outcome::kQueued);
  EXPECT_TRUE(budget.Cancel(head));
  EXPECT_EQ(granted, 10);  // the one behind it fits now
  EXPECT_EQ(budget.used(), 100u);
  EXPECT_EQ(budget.waiting(), 0u);
  // Granted already: Cancel says so, and the owner releases.
  EXPECT_FALSE(budget.Cancel(next));
  budget.Release(10);
  budget.Release(90);
  EXPECT_EQ(budget.used(), 0u);
}

TEST(FairBudgetTest, AReservationLargerThanTheLimitIsRefusedAtOnce) {
  FairBudget budget(100);
  uint64_t ticket = 0;
  EXPECT_EQ(budget.Reserve(101, [] {}, &ticket), Outcome::kTooLarge);
  EXPECT_EQ(budget.waiting(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.Reserve(100, [] {}, &ticket), Outcome::kGranted);
}

// Threads that reserve, wait for their grant when queued, and release: used
// bytes never pass the limit and every reservation gets through.
TEST(FairBudgetTest, RacingThreadsStayWithinTheLimit) {
  FairBudget budget(1000);
  std::atomic<size_t> peak{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const size_t bytes = 200 + 200 * static_cast<size_t>(t);  // 200..800
      for (int i = 0; i < 2000; ++i) {
        std::atomic<bool> granted{false};
        uint64_t ticket = 0;
        if (budget.Reserve(bytes, [&granted] { granted = true; }, &ticket) ==
            Outcome::kQueued) {
          while (!granted) std::this_thread::yield();
        }
        size_t used = budget.used();
        size_t seen = peak.load();
        while (used > seen && !peak.compare_exchange_weak(seen, used)) {
        }
        budget.Release(bytes);
      }
      ++done;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 4);
  EXPECT_LE(peak.load(), 1000u);
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.waiting(), 0u);
}

}  // namespace
}  // namespace chunkd::service
