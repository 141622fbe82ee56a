#include "service/periodic.h"

#include <utility>

namespace chunkd::service {

PeriodicThread::PeriodicThread(absl::Duration interval,
                               std::function<void()> tick, bool tick_at_start)
    : interval_(interval),
      tick_(std::move(tick)),
      tick_at_start_(tick_at_start) {}

PeriodicThread::~PeriodicThread() { Stop(); }

void PeriodicThread::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    if (tick_at_start_) tick_();
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_),
                         [this] { return stop_; })) {
      // Outside the lock: Stop() only waits for the tick to end.
      lock.unlock();
      tick_();
      lock.lock();
    }
  });
}

void PeriodicThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace chunkd::service
