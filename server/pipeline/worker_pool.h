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
// A task that must block for long (an index call waiting for Redis to come
// back: index::IndexOptions::on_wait) says so with Blocking(): the pool
// lends a spare worker for the time, so that a few blocked tasks do not hold
// up every other stream of a pool with one worker per core.
//
// Thread safety: Submit() and ParallelFor() may be called from any thread,
// including from a task; Blocking() from any thread. The destructor runs
// every task already submitted, then joins.
#ifndef CHUNKD_PIPELINE_WORKER_POOL_H_
#define CHUNKD_PIPELINE_WORKER_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
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

  // Spare workers lent at once, at most (beyond that, blocked tasks hold
  // their workers).
  static constexpr size_t kMaxSpareThreads = 64;

  void Submit(std::function<void()> task);

  // The calling thread is about to block (`blocked`), or is back. When it
  // is a worker of a pool, that pool starts a spare worker, which leaves
  // once the blocked one is back and the spare is between tasks. A call
  // that changes nothing (any other thread; twice the same) is ignored.
  static void Blocking(bool blocked);

  size_t threads() const { return workers_.size(); }

  // Spare workers running now (lent, or finishing a task before leaving).
  size_t spare_threads() const;

  // Tasks waiting for a thread.
  size_t queue_depth() const;

  // chunking::Executor: the workers, of which the caller is usually one.
  size_t parallelism() const override { return workers_.size(); }
  void ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) override;
  void Rest() override { resting_.store(true, std::memory_order_relaxed); }

 private:
  // A spare worker: `done` once it has left (then it only needs joining).
  struct Spare {
    std::thread thread;
    bool done = false;
  };

  // `spare`: null for the permanent workers.
  void Run(Spare* spare);
  void Lend();
  void TakeBack();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<chunking::IdleSpin::Queued> queue_;  // guarded by mu_
  std::atomic<size_t> queued_{0};                 // queue_.size(), for spinning
  std::atomic<bool> resting_{false};              // Rest() until a task
  bool stopping_ = false;                         // guarded by mu_
  size_t idle_ = 0;  // workers spinning or waiting for a task; guarded by mu_
  size_t blocked_ = 0;        // workers in Blocking(true); guarded by mu_
  size_t spares_ = 0;         // spares not done; guarded by mu_
  std::list<Spare> spare_list_;  // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace chunkd::pipeline

#endif  // CHUNKD_PIPELINE_WORKER_POOL_H_
