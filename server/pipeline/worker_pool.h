// WorkerPool: the one pool of worker threads shared by every stream
// (docs/design.md, "Threading model"). Streams submit short tasks; no stream
// owns a thread.
//
// It is also the chunking engine's Executor: a stream's task fans its stage-1
// segments out with ParallelFor, taking part itself and never waiting for a
// queued helper (chunking/executor.h), so streams running inside the pool
// cannot deadlock it. Helpers are offered only to workers that are idle at
// that moment: one large stream uses every core (SS-CDC's SFMS), while many
// streams keep every worker busy with their own tasks and each runs its
// segments inline (MFMS), instead of flooding the queue with helpers that
// would start too late to help.
//
// An idle worker spins before it sleeps (chunking::IdleSpin): waking a
// sleeping thread can take longer than one of the engine's stage-1 rounds,
// which come back to back, while between messages the pool waits on the
// network and a long spin is CPU time for nothing.
//
// Thread safety: Submit() and ParallelFor() may be called from any thread,
// including from a task. The destructor runs every task already submitted,
// then joins.
#ifndef CHUNKD_PIPELINE_WORKER_POOL_H_
#define CHUNKD_PIPELINE_WORKER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "chunking/executor.h"

namespace chunkd::pipeline {

class WorkerPool final : public chunking::Executor {
 public:
  // REQUIRES: threads >= 1.
  explicit WorkerPool(size_t threads);
  ~WorkerPool() override;
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(std::function<void()> task);

  size_t threads() const { return workers_.size(); }

  // Tasks waiting for a thread.
  size_t queue_depth() const;

  // chunking::Executor: the workers, of which the caller is usually one.
  size_t parallelism() const override { return workers_.size(); }
  void ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) override;
  void Rest() override { resting_.store(true, std::memory_order_relaxed); }

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<chunking::IdleSpin::Queued> queue_;  // guarded by mu_
  std::atomic<size_t> queued_{0};                 // queue_.size(), for spinning
  std::atomic<bool> resting_{false};              // Rest() until a task
  bool stopping_ = false;                         // guarded by mu_
  size_t idle_ = 0;  // workers spinning or waiting for a task; guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_WORKER_POOL_H_
