#include "pipeline/worker_pool.h"

#include <atomic>
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
