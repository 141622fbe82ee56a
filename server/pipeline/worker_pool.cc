#include "pipeline/worker_pool.h"

#include <utility>

namespace chunkd::pipeline {

WorkerPool::WorkerPool(size_t threads) {
  if (threads == 0) threads = 1;
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { Run(); });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
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

void WorkerPool::Run() {
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
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --idle_;
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

}  // namespace chunkd::pipeline
