#include "pipeline/worker_pool.h"

#include <atomic>
#include <set>
#include <thread>

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

}  // namespace
}  // namespace chunkd::pipeline
