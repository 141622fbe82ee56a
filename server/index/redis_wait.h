// FailoverWait: how the calls of one Redis index wait for Redis to come back
// (IndexOptions::failover_wait; docs/design.md, "When the index is full or
// unreachable").
//
// A call that failed in a way worth waiting out (what, and what it may
// re-send, is the batch runner's business: redis_batch.h) keeps trying until
// Deadline(): the bound counted from when the index started failing, so
// that a failover costs a call at most the bound and a longer outage fails
// calls at once instead of making each of them wait. Any answer from Redis
// (a call or a health probe that got through) ends the outage. Between
// attempts the call sleeps in Sleep(), which Stop() cuts short for good.
//
// What it reports: through `warn`, a line when calls start waiting and one
// when none waits any more, at most one such pair every kLogInterval; and
// counts() (chunkd's metrics).
//
// Thread safety: thread-safe.
#ifndef CHUNKD_INDEX_REDIS_WAIT_H_
#define CHUNKD_INDEX_REDIS_WAIT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace chunkd::index {

class FailoverWait {
 public:
  static constexpr absl::Duration kLogInterval = absl::Seconds(5);

  struct Counts {
    uint64_t waiting = 0;    // calls waiting now
    uint64_t recovered = 0;  // waits that ended with the call going on
    uint64_t expired = 0;    // waits that ended with the call failing
  };

  // `on_wait` and `warn` as in IndexOptions (either may be empty); `clock`
  // tells the time (tests pass their own).
  FailoverWait(absl::Duration bound, std::function<void(bool)> on_wait,
               std::function<void(const std::string&)> warn,
               std::function<absl::Time()> clock = [] { return absl::Now(); });
  FailoverWait(const FailoverWait&) = delete;
  FailoverWait& operator=(const FailoverWait&) = delete;

  absl::Duration bound() const { return bound_; }

  // The index failed (UNAVAILABLE): an outage starts, unless one runs.
  void Failed();
  // Redis answered: the outage, if any, is over.
  void Answered();
  // Until when a call that failed may keep trying: the outage's start plus
  // the bound (the time of this call when no outage runs); the past once
  // Stop() was called.
  absl::Time Deadline();

  // A call starts waiting, because of `why`: counted, maybe logged, and
  // on_wait(true) on the calling thread.
  void Begin(const absl::Status& why);
  // It stops waiting after `waited`: it goes on (`recovered`) or fails;
  // on_wait(false).
  void End(bool recovered, absl::Duration waited);

  // Sleeps for `pause`, or until Stop(). False once stopped.
  bool Sleep(absl::Duration pause);

  // Wakes every sleeper; from now on Sleep() returns false at once and
  // Deadline() is past.
  void Stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  Counts counts() const;

 private:
  const absl::Duration bound_;
  const std::function<void(bool)> on_wait_;
  const std::function<void(const std::string&)> warn_;
  const std::function<absl::Time()> clock_;

  std::atomic<bool> stopped_{false};
  std::atomic<bool> failing_{false};  // failing_since_ is set

  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Time failing_since_;  // guarded by mu_, while failing_
  Counts counts_;             // guarded by mu_
  // The log: whether a "waiting" line is out without its "no longer" line,
  // when it went out, and what happened since.
  bool announced_ = false;                              // guarded by mu_
  absl::Time announced_at_ = absl::InfinitePast();      // guarded by mu_
  uint64_t recovered_since_ = 0;                        // guarded by mu_
  uint64_t expired_since_ = 0;                          // guarded by mu_
  absl::Duration longest_since_ = absl::ZeroDuration();  // guarded by mu_
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_WAIT_H_
