// WorkerPool: the one pool of worker threads shared by every stream (DESIGN.md
// §1). Streams submit short tasks; no stream owns a thread.
//
// Thread safety: Submit() may be called from any thread, including from a
// task. The destructor runs every task already submitted, then joins.
#ifndef CHUNKD_PIPELINE_WORKER_POOL_H_
#define CHUNKD_PIPELINE_WORKER_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chunkd::pipeline {

class WorkerPool {
 public:
  // REQUIRES: threads >= 1.
  explicit WorkerPool(size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(std::function<void()> task);

  size_t threads() const { return workers_.size(); }

  // Tasks waiting for a thread.
  size_t queue_depth() const;

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_WORKER_POOL_H_
