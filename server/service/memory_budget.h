// MemoryBudget: the global bound on request bytes held by all streams
// (docs/design.md, "Backpressure").
//
// A stream reserves max_message_bytes before it starts a read, keeps the
// received bytes charged while they wait in its inbox and are processed, and
// releases them when its task is done with them. When a reservation does not
// fit, the stream registers a wake-up and stops reading, so gRPC flow control
// slows its client; the next release wakes it. Used bytes never exceed the
// limit.
//
// Thread safety: thread-safe. Wake-ups run on the releasing thread after the
// budget's lock is dropped, so they may take other locks.
#ifndef CHUNKD_SERVICE_MEMORY_BUDGET_H_
#define CHUNKD_SERVICE_MEMORY_BUDGET_H_

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace chunkd::service {

class MemoryBudget {
 public:
  explicit MemoryBudget(size_t limit) : limit_(limit) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Charges `bytes` if they fit and returns true. Otherwise returns false and
  // keeps `wake`, which runs once after some bytes are released.
  bool ReserveOrWait(size_t bytes, std::function<void()> wake);

  // Returns `bytes` and runs every waiting wake-up.
  void Release(size_t bytes);

  size_t limit() const { return limit_; }
  size_t used() const;
  size_t waiting() const;

 private:
  const size_t limit_;
  mutable std::mutex mu_;
  size_t used_ = 0;                          // guarded by mu_
  std::vector<std::function<void()>> wake_;  // guarded by mu_
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_MEMORY_BUDGET_H_
