#include "pipeline/worker_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace chunkd::pipeline {
namespace {

TEST(WorkerPoolTest, RunsEverySubmittedTaskBeforeDestruction) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(3);
    EXPECT_EQ(pool.threads(), 3u);
    for (int i = 0; i < 1000; ++i) pool.Submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 1000);
}

TEST(WorkerPoolTest, TasksMaySubmitTasks) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(2);
    pool.Submit([&] {
      ran.fetch_add(1);
      pool.Submit([&] { ran.fetch_add(1); });
    });
    while (ran.load() < 2) std::this_thread::yield();
  }
  EXPECT_EQ(ran.load(), 2);
}

TEST(WorkerPoolTest, UsesSeveralThreads) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> waiting{0};
  {
    WorkerPool pool(2);
    for (int i = 0; i < 2; ++i) {
      pool.Submit([&] {
        {
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        }
        // Both tasks must be running at once for either to finish.
        waiting.fetch_add(1);
        while (waiting.load() < 2) std::this_thread::yield();
      });
    }
  }
  EXPECT_EQ(ids.size(), 2u);
}

// Waits (bounded) until `pool` has no spare worker left.
size_t SparesAfterTheyLeave(const WorkerPool& pool) {
  for (int i = 0; i < 6000 && pool.spare_threads() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pool.spare_threads();
}

// A task that blocks lends the pool a spare worker: with one worker, a task
// submitted while the first is blocked runs before the first goes on (it
// could not without the spare: the first waits for it). The spare leaves
// once the first is back.
TEST(WorkerPoolTest, ABlockedWorkerLendsTheOthersASpare) {
  WorkerPool pool(1);
  std::promise<void> second_ran;
  std::future<void> ran = second_ran.get_future();
  std::promise<bool> first_saw_it;
  std::future<bool> saw = first_saw_it.get_future();
  pool.Submit([&] {
    WorkerPool::Blocking(true);
    WorkerPool::Blocking(true);  // twice: one spare all the same
    pool.Submit([&] { second_ran.set_value(); });
    // The bound only turns a hang (no spare) into a failure.
    first_saw_it.set_value(ran.wait_for(std::chrono::seconds(60)) ==
                           std::future_status::ready);
    EXPECT_EQ(pool.spare_threads(), 1u);
    WorkerPool::Blocking(false);
  });
  EXPECT_TRUE(saw.get());
  EXPECT_EQ(SparesAfterTheyLeave(pool), 0u);

  // Work goes on as before; a second blocking lends a new spare.
  std::atomic<int> done{0};
  pool.Submit([&] {
    WorkerPool::Blocking(true);
    EXPECT_EQ(pool.spare_threads(), 1u);
    WorkerPool::Blocking(false);
    done.fetch_add(1);
  });
  for (int i = 0; i < 100; ++i) pool.Submit([&] { done.fetch_add(1); });
  for (int i = 0; i < 6000 && done.load() < 101; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(done.load(), 101);
  EXPECT_EQ(SparesAfterTheyLeave(pool), 0u);
}

// Only a pool's own workers lend: another thread that blocks takes no
// worker from anyone.
TEST(WorkerPoolTest, BlockingOutsideThePoolLendsNothing) {
  WorkerPool pool(1);
  WorkerPool::Blocking(true);
  EXPECT_EQ(pool.spare_threads(), 0u);
  WorkerPool::Blocking(false);
  std::promise<size_t> spares;
  pool.Submit([&] { spares.set_value(pool.spare_threads()); });
  EXPECT_EQ(spares.get_future().get(), 0u);
}

// Destroying a pool whose worker is blocked (and lent a spare) runs every
// task and joins every thread.
TEST(WorkerPoolTest, DestructionWithASpareOut) {
  std::atomic<int> ran{0};
  std::promise<void> release;  // outlives the pool, whose tasks use it
  std::shared_future<void> released = release.get_future().share();
  {
    WorkerPool pool(1);
    pool.Submit([&, released] {
      WorkerPool::Blocking(true);
      // Bounded: a hang (no spare) fails the count below instead.
      if (released.wait_for(std::chrono::seconds(60)) !=
          std::future_status::ready) {
        return;
      }
      WorkerPool::Blocking(false);
      ran.fetch_add(1);
    });
    pool.Submit([&] {
      ran.fetch_add(1);
      release.set_value();
    });
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 52);
}

// As the chunking engine's Executor: every index once, and a ParallelFor
// issued from inside a task of a fully busy pool still finishes (the caller
// claims every index itself rather than waiting for queued helpers).
TEST(WorkerPoolTest, ParallelForFromInsideEveryWorker) {
  WorkerPool pool(2);
  EXPECT_EQ(pool.parallelism(), 2u);
  std::vector<std::atomic<int>> hits(2 * 100);
  std::atomic<int> finished{0};
  for (int task = 0; task < 2; ++task) {
    pool.Submit([&, task] {
      pool.ParallelFor(100,
                       [&](size_t i) { hits[task * 100 + i].fetch_add(1); });
      finished.fetch_add(1);
    });
  }
  while (finished.load() < 2) std::this_thread::yield();
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  std::vector<std::atomic<int>> outside(1000);
  pool.ParallelFor(outside.size(), [&](size_t i) { outside[i].fetch_add(1); });
  for (const auto& h : outside) EXPECT_EQ(h.load(), 1);
}

}  // namespace
}  // namespace chunkd::pipeline
