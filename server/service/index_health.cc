#include "service/index_health.h"

#include <utility>

namespace chunkd::service {

IndexHealthMonitor::IndexHealthMonitor(index::FingerprintIndex* index,
                                       absl::Duration interval,
                                       Callback on_change)
    : index_(index), interval_(interval), on_change_(std::move(on_change)) {}

IndexHealthMonitor::~IndexHealthMonitor() { Stop(); }

void IndexHealthMonitor::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void IndexHealthMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void IndexHealthMonitor::Loop() {
  bool first = true;
  absl::StatusCode last = absl::StatusCode::kOk;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const absl::Status status = index_->Health();
    lock.lock();
    if (stop_) break;
    // Only changes of the code are reported (unreachable, full, serving):
    // the message varies from probe to probe (backoff times, memory
    // figures) and would flood the log.
    if (first || status.code() != last) {
      first = false;
      last = status.code();
      // Under the lock, so that Stop() cannot return while it runs.
      on_change_(status);
    }
    cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_),
                 [this] { return stop_; });
  }
}

}  // namespace chunkd::service
