#include "pipeline/worker_pool.h"

#include <utility>

namespace chunkd::pipeline {
namespace {

// The pool whose worker this thread is (null elsewhere), and whether it has
// lent a spare for this thread (Blocking).
thread_local WorkerPool* current_pool = nullptr;
thread_local bool lent_for_this_thread = false;

}  // namespace

WorkerPool::WorkerPool(size_t threads) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { Run(nullptr); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  // The tasks still running may lend spares too (they may wait for tasks
  // queued behind them): join until none is left.
  for (;;) {
    std::list<Spare> spares;
    {
      std::lock_guard<std::mutex> lock(mu_);
      spares.swap(spare_list_);
    }
    if (spares.empty()) break;
    for (Spare& spare : spares) spare.thread.join();
  }
}

void WorkerPool::Blocking(bool blocked) {
  WorkerPool* pool = current_pool;
  if (pool == nullptr || blocked == lent_for_this_thread) return;
  lent_for_this_thread = blocked;
  if (blocked) {
    pool->Lend();
  } else {
    pool->TakeBack();
  }
}

void WorkerPool::Lend() {
  std::list<Spare> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++blocked_;
    for (auto it = spare_list_.begin(); it != spare_list_.end();) {
      auto next = std::next(it);
      if (it->done) left.splice(left.end(), spare_list_, it);
      it = next;
    }
    if (spares_ < blocked_ && spares_ < kMaxSpareThreads) {
      ++spares_;
      Spare& spare = spare_list_.emplace_back();
      spare.thread = std::thread([this, &spare] { Run(&spare); });
    }
  }
  for (Spare& spare : left) spare.thread.join();
}

void WorkerPool::TakeBack() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --blocked_;
  }
  // A spare may leave now.
  cv_.notify_all();
}

size_t WorkerPool::spare_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spares_;
}

void WorkerPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(task), std::chrono::steady_clock::now()});
    resting_.store(false, std::memory_order_relaxed);
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
}

void WorkerPool::ParallelFor(size_t n, absl::FunctionRef<void(size_t)> fn) {
  size_t helpers = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Workers that will pick a helper up now; queued tasks take the first.
    helpers = idle_ > queue_.size() ? idle_ - queue_.size() : 0;
  }
  chunking::ParallelForWithHelpers(
      n, helpers, fn,
      [this](std::function<void()> task) { Submit(std::move(task)); });
}

size_t WorkerPool::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void WorkerPool::Run(Spare* spare) {
  current_pool = this;
  chunking::IdleSpin spin;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++idle_;
    }
    spin.Spin(queued_, resting_);
    std::function<void()> task;
    std::chrono::steady_clock::time_point queued_at;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A spare leaves when the worker it stands in for is back.
      auto surplus = [&] { return spare != nullptr && spares_ > blocked_; };
      cv_.wait(lock,
               [&] { return stopping_ || !queue_.empty() || surplus(); });
      --idle_;
      if (surplus() || queue_.empty()) {
        // Or stopping, and nothing left to run.
        if (spare != nullptr) {
          --spares_;
          spare->done = true;
        }
        return;
      }
      task = std::move(queue_.front().task);
      queued_at = queue_.front().at;
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    spin.TookTask(queued_at);
    task();
  }
}

}  // namespace chunkd::pipeline
