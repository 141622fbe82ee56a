#include "index/redis_wait.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chunkd::index {

FailoverWait::FailoverWait(absl::Duration bound,
                           std::function<void(bool)> on_wait,
                           std::function<void(const std::string&)> warn,
                           std::function<absl::Time()> clock)
    : bound_(bound),
      on_wait_(std::move(on_wait)),
      warn_(std::move(warn)),
      clock_(std::move(clock)) {}

void FailoverWait::Failed() {
  if (failing_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (failing_.load(std::memory_order_relaxed)) return;
  failing_since_ = clock_();
  failing_.store(true, std::memory_order_release);
}

void FailoverWait::Answered() {
  // Every successful call comes here: no lock unless an outage ends.
  if (!failing_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  failing_.store(false, std::memory_order_release);
}

absl::Time FailoverWait::Deadline() {
  if (stopped()) return absl::InfinitePast();
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time since =
      failing_.load(std::memory_order_relaxed) ? failing_since_ : clock_();
  return since + bound_;
}

void FailoverWait::Begin(const absl::Status& why) {
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.waiting;
    const absl::Time now = clock_();
    if (!announced_ && now - announced_at_ >= kLogInterval) {
      announced_ = true;
      announced_at_ = now;
      recovered_since_ = 0;
      expired_since_ = 0;
      longest_since_ = absl::ZeroDuration();
      line = absl::StrCat(
          "redis: index calls wait for redis to come back, each for at most ",
          absl::FormatDuration(bound_), " (--redis_failover_wait): ",
          why.message());
    }
  }
  if (!line.empty() && warn_) warn_(line);
  if (on_wait_) on_wait_(true);
}

void FailoverWait::End(bool recovered, absl::Duration waited) {
  if (on_wait_) on_wait_(false);
  std::string line;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --counts_.waiting;
    ++(recovered ? counts_.recovered : counts_.expired);
    ++(recovered ? recovered_since_ : expired_since_);
    longest_since_ = std::max(longest_since_, waited);
    if (announced_ && counts_.waiting == 0) {
      announced_ = false;
      line = absl::StrCat(
          "redis: no index call waits for redis any more: ", recovered_since_,
          " went on, ", expired_since_, " gave up; the longest wait ",
          absl::FormatDuration(absl::Trunc(longest_since_,
                                           absl::Milliseconds(1))));
    }
  }
  if (!line.empty() && warn_) warn_(line);
}

bool FailoverWait::Sleep(absl::Duration pause) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoNanoseconds(pause),
               [this] { return stopped(); });
  return !stopped();
}

void FailoverWait::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

FailoverWait::Counts FailoverWait::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace chunkd::index
