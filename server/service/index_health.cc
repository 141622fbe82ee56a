#include "service/index_health.h"

#include <utility>

namespace chunkd::service {

IndexHealthMonitor::IndexHealthMonitor(index::FingerprintIndex* index,
                                       absl::Duration interval,
                                       Callback on_change)
    : index_(index),
      on_change_(std::move(on_change)),
      thread_(interval, [this] { Probe(); }, /*tick_at_start=*/true) {}

IndexHealthMonitor::~IndexHealthMonitor() { Stop(); }

void IndexHealthMonitor::SetReported(const absl::Status& status) {
  first_ = false;
  last_ = status.code();
}

void IndexHealthMonitor::Start() { thread_.Start(); }

void IndexHealthMonitor::Stop() { thread_.Stop(); }

void IndexHealthMonitor::Probe() {
  const absl::Status status = index_->Health();
  // Only changes of the code are reported (unreachable, full, serving): the
  // message varies from probe to probe (backoff times, memory figures) and
  // would flood the log.
  if (first_ || status.code() != last_) {
    first_ = false;
    last_ = status.code();
    on_change_(status);
  }
}

}  // namespace chunkd::service
