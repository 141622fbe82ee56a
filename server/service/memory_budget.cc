#include "service/memory_budget.h"

#include <utility>

namespace chunkd::service {

bool MemoryBudget::ReserveOrWait(size_t bytes, std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes <= limit_ - used_) {
    used_ += bytes;
    return true;
  }
  wake_.push_back(std::move(wake));
  return false;
}

void MemoryBudget::Release(size_t bytes) {
  if (bytes == 0) return;
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    wake.swap(wake_);
  }
  for (auto& w : wake) w();
}

size_t MemoryBudget::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

size_t MemoryBudget::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wake_.size();
}

}  // namespace chunkd::service
