#include "chunking/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace chunkd::chunking {
namespace {

// What the caller and its helpers share. fn refers to the caller's stack; it
// is called only for a claimed index < n, and the caller returns only after
// every claimed index has finished, so fn is never called after the return.
class ParallelState {
 public:
  ParallelState(size_t n, absl::FunctionRef<void(size_t)> fn)
      : n_(n), fn_(fn) {}

  // Claims and runs indices until none is left.
  void Work() {
    size_t ran = 0;
    for (;;) {
      const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_) break;
      fn_(i);
      ++ran;
    }
    if (ran == 0) return;
    // acq_rel: publishes this thread's writes to whoever sees done_ == n_.
    if (done_.fetch_add(ran, std::memory_order_acq_rel) + ran == n_) {
      // Under the lock, so that a waiter between its check and its wait
      // cannot miss the notification.
      std::lock_guard<std::mutex> lock(mu_);
      cv_.notify_all();
    }
  }

  // Returns once every index has finished. Called after Work(), when every
  // index is claimed: the indices still running are held by threads that are
  // running them, never by queued tasks.
  void Wait() {
    if (done_.load(std::memory_order_acquire) == n_) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock,
             [this] { return done_.load(std::memory_order_acquire) == n_; });
  }

 private:
  const size_t n_;
  const absl::FunctionRef<void(size_t)> fn_;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void IdleSpin::Spin(const std::atomic<size_t>& queued,
                    const std::atomic<bool>& resting) {
  constexpr int kPausesPerClockRead = 16;
  idle_since_ = std::chrono::steady_clock::now();
  const auto until = idle_since_ + budget_;
  do {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (queued.load(std::memory_order_acquire) != 0 ||
          resting.load(std::memory_order_relaxed)) {
        return;
      }
      CpuRelax();
    }
  } while (std::chrono::steady_clock::now() < until);
}

void IdleSpin::TookTask(std::chrono::steady_clock::time_point queued_at) {
  const auto waited =
      std::max(queued_at, idle_since_) - idle_since_;  // 0: it was there
  if (waited >= kMaxSpin) return;  // a gap: says nothing about rounds
  recent_ = (3 * recent_ + waited) / 4;
  budget_ =
      std::clamp<std::chrono::nanoseconds>(4 * recent_, kMinSpin, kMaxSpin);
}

void ParallelForWithHelpers(
    size_t n, size_t helpers, absl::FunctionRef<void(size_t)> fn,
    absl::FunctionRef<void(std::function<void()>)> submit) {
  if (n == 0) return;
  helpers = std::min(helpers, n - 1);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto state = std::make_shared<ParallelState>(n, fn);
  for (size_t h = 0; h < helpers; ++h) {
    submit([state] { state->Work(); });
  }
  state->Work();
  state->Wait();
}

ThreadPoolExecutor::ThreadPoolExecutor(size_t parallelism) {
  const size_t threads = parallelism > 1 ? parallelism - 1 : 0;
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Run(); });
  }
}

ThreadPoolExecutor::~ThreadPoolExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPoolExecutor::ParallelFor(size_t n,
                                     absl::FunctionRef<void(size_t)> fn) {
  ParallelForWithHelpers(
      n, threads_.size(), fn, [this](std::function<void()> task) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          queue_.push_back({std::move(task), std::chrono::steady_clock::now()});
          resting_.store(false, std::memory_order_relaxed);
          queued_.fetch_add(1, std::memory_order_release);
        }
        cv_.notify_one();
      });
}

void ThreadPoolExecutor::Run() {
  IdleSpin spin;
  for (;;) {
    // Spin briefly before sleeping: a sleeping thread can take hundreds of
    // microseconds to wake up (on VMs especially), longer than a stage-1
    // round, and the engine issues its rounds back to back.
    spin.Spin(queued_, resting_);
    std::function<void()> task;
    std::chrono::steady_clock::time_point queued_at;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front().task);
      queued_at = queue_.front().at;
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    spin.TookTask(queued_at);
    task();
  }
}

}  // namespace chunkd::chunking
