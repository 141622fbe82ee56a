#include "service/memory_budget.h"

#include <algorithm>
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

FairBudget::Outcome FairBudget::Reserve(size_t bytes,
                                        std::function<void()> grant,
                                        uint64_t* ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > limit_) return Outcome::kTooLarge;
  if (queue_.empty() && bytes <= limit_ - used_) {
    used_ += bytes;
    return Outcome::kGranted;
  }
  *ticket = next_ticket_++;
  queue_.push_back({*ticket, bytes, std::move(grant)});
  queued_bytes_ += bytes;
  return Outcome::kQueued;
}

void FairBudget::GrantLocked(std::vector<std::function<void()>>* grants) {
  while (!queue_.empty() && queue_.front().bytes <= limit_ - used_) {
    used_ += queue_.front().bytes;
    queued_bytes_ -= queue_.front().bytes;
    grants->push_back(std::move(queue_.front().grant));
    queue_.pop_front();
  }
}

bool FairBudget::Cancel(uint64_t ticket) {
  std::vector<std::function<void()>> grants;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [ticket](const Waiter& w) {
                             return w.ticket == ticket;
                           });
    if (it == queue_.end()) return false;
    queued_bytes_ -= it->bytes;
    queue_.erase(it);
    // The ones behind it may fit now.
    GrantLocked(&grants);
  }
  for (auto& g : grants) g();
  return true;
}

void FairBudget::Release(size_t bytes) {
  if (bytes == 0) return;
  std::vector<std::function<void()>> grants;
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= bytes;
    GrantLocked(&grants);
  }
  for (auto& g : grants) g();
}

size_t FairBudget::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

size_t FairBudget::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t FairBudget::waiting_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

}  // namespace chunkd::service
