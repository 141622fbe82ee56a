// Executor: how the chunking engine runs independent tasks (stage-1 segments,
// docs/design.md, "The two-stage engine") in parallel, without the chunking
// library depending on any particular thread pool. pipeline::WorkerPool
// implements it for the service; ThreadPoolExecutor below is a small owning
// pool for tools, benchmarks and tests. A null Executor* means "run everything
// on the calling thread".
//
// The contract that makes a shared pool safe. ParallelFor(n, fn) runs fn(i)
// once for every i in [0, n). The calling thread takes part: it claims indices
// from the same atomic counter as the helpers, and once every index is
// claimed it waits only for indices that other threads have already claimed
// and are running — never for a helper task still queued in the pool. So a
// ParallelFor issued from inside a pool task (StreamChunker runs inside one in
// the service) finishes even when every other pool thread is busy or blocked:
// in the worst case the caller runs all n indices itself, and helper tasks that
// start late find nothing left to claim and return at once.
//
// Thread safety: ParallelFor may be called concurrently from any number of
// threads (each call is independent); fn must tolerate running on several
// threads at once for different indices.
#ifndef CHUNKD_CHUNKING_EXECUTOR_H_
#define CHUNKD_CHUNKING_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace chunkd::chunking {

class Executor {
 public:
  Executor() = default;
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  virtual ~Executor() = default;

  // How many threads may run indices of one ParallelFor at once, the calling
  // thread included. At least 1.
  virtual size_t parallelism() const = 0;

  // Runs fn(i) for every i in [0, n) and returns when all have returned; see
  // the header comment for the guarantees. fn must not throw.
  virtual void ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) = 0;

  // A hint: the caller is about to work alone for a while (an index round
  // trip), so workers spinning for the next task may sleep now instead of
  // spinning through it. The next task wakes them as usual.
  virtual void Rest() {}
};

// The shared algorithm of every Executor in this project: runs fn over [0, n)
// on the calling thread plus up to `helpers` helper tasks, each handed to
// `submit` (which must eventually run it on some thread; it may run late).
// Helpers hold the shared state by reference count, so a helper that starts
// after the call returned touches neither fn nor the caller's stack.
void ParallelForWithHelpers(
    size_t n, size_t helpers, absl::FunctionRef<void(size_t)> fn,
    absl::FunctionRef<void(std::function<void()>)> submit);

// Runs fn(i) for i in [0, n) on `executor`, or inline when it is null.
inline void RunParallel(Executor* executor, size_t n,
                        absl::FunctionRef<void(size_t)> fn) {
  if (executor == nullptr || n <= 1 || executor->parallelism() <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  executor->ParallelFor(n, fn);
}

// A pause hint for spin-wait loops.
void CpuRelax();

// How long a pool's idle worker spins before it sleeps. Waking a sleeping
// thread can take longer than one of the engine's stage-1 rounds (tens of
// microseconds on VMs), and the rounds of a piece come back to back, so a
// worker spins; but between a stream's messages the pool waits on the
// network for much longer, and every microsecond spun there is CPU time
// for nothing. So the spin lasts about four times the recent waits between
// tasks that were short (under kMaxSpin; longer ones are such gaps and
// teach nothing), between kMinSpin and kMaxSpin: short rounds keep the
// worker awake, and a gap costs a short spin.
//
// Thread safety: one per worker thread.
class IdleSpin {
 public:
  static constexpr std::chrono::microseconds kMinSpin{10};
  static constexpr std::chrono::microseconds kMaxSpin{100};

  // The worker is idle: spins until `queued` is not zero, `resting` is set
  // (Executor::Rest) or the budget has passed, reading the clock only every
  // few pauses.
  void Spin(const std::atomic<size_t>& queued,
            const std::atomic<bool>& resting);
  // A task queued with the time it was queued at.
  struct Queued {
    std::function<void()> task;
    std::chrono::steady_clock::time_point at;
  };
  // The worker took a task queued at `queued_at`: how long the worker had
  // waited for it (up to when it was queued, not when the worker woke: a
  // late wake-up says nothing about the rounds) teaches the budget.
  void TookTask(std::chrono::steady_clock::time_point queued_at);

  std::chrono::nanoseconds budget() const { return budget_; }

 private:
  std::chrono::steady_clock::time_point idle_since_;
  std::chrono::nanoseconds recent_ = kMaxSpin / 4;  // average short wait
  std::chrono::nanoseconds budget_ = kMaxSpin;
};

// An executor that owns parallelism - 1 threads; the thread calling
// ParallelFor is the remaining one, so ThreadPoolExecutor(4) keeps at most 4
// threads busy. For chunkctl, benchmarks and tests; the server uses
// pipeline::WorkerPool. An idle thread spins (IdleSpin) before it sleeps,
// so that back-to-back ParallelFor calls (the engine's rounds) find it
// awake.
//
// Thread safety: as Executor. Copy and move disabled. The destructor waits for
// the helper tasks already queued (they return at once when their
// ParallelFor is over).
class ThreadPoolExecutor final : public Executor {
 public:
  // REQUIRES: parallelism >= 1 (0 is treated as 1).
  explicit ThreadPoolExecutor(size_t parallelism);
  ~ThreadPoolExecutor() override;

  size_t parallelism() const override { return threads_.size() + 1; }
  void ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) override;
  void Rest() override { resting_.store(true, std::memory_order_relaxed); }

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<IdleSpin::Queued> queue_;  // guarded by mu_
  std::atomic<size_t> queued_{0};       // queue_.size(), for spinning
  std::atomic<bool> resting_{false};    // Rest() until the next task
  bool stopping_ = false;               // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace chunkd::chunking

#endif  // CHUNKD_CHUNKING_EXECUTOR_H_
