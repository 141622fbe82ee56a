// PeriodicThread: runs a function on its own thread every `interval` until
// stopped. For background chores that must not run on gRPC's or the worker
// pool's threads (they may block, or must run even when both are busy).
//
// Thread safety: Start and Stop from one owner thread; `tick` never runs
// concurrently with itself, nor after Stop() returns.
#ifndef CHUNKD_SERVICE_PERIODIC_H_
#define CHUNKD_SERVICE_PERIODIC_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace chunkd::service {

class PeriodicThread {
 public:
  // REQUIRES: interval > 0. With `tick_at_start` the first tick runs as
  // soon as the thread starts, else one interval later.
  PeriodicThread(absl::Duration interval, std::function<void()> tick,
                 bool tick_at_start = false);
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;
  // Stops the thread.
  ~PeriodicThread();

  // Starts the thread. Idempotent.
  void Start();
  // Ends the wait at once (a tick under way finishes first) and joins the
  // thread. Idempotent.
  void Stop();

 private:
  const absl::Duration interval_;
  const std::function<void()> tick_;
  const bool tick_at_start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_PERIODIC_H_
