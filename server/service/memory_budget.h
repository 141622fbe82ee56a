// MemoryBudget: the global bound on request bytes held by all streams
// (docs/design.md, "Backpressure"). FairBudget: the global bound on what the
// streams hold beyond them, reserved once per stream (docs/design.md,
// "Memory bounds").
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
#include <cstdint>
#include <deque>
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

// A budget whose reservations are granted in the order they are asked for:
// a reservation that does not fit waits, and every later one waits behind
// it, so a large reservation is never starved by a stream of small ones.
// Each reservation is held until its owner releases it; a queued one that
// its owner gives up is cancelled. A reservation larger than the whole
// limit is refused at once, as it could never be granted.
//
// Thread safety: thread-safe. Grants run on the releasing (or cancelling)
// thread after the budget's lock is dropped; they must not block, as that
// thread may hold its own stream's lock.
class FairBudget {
 public:
  enum class Outcome {
    kGranted,   // charged now
    kQueued,    // charged later, in turn: `grant` runs then
    kTooLarge,  // larger than the limit: nothing charged or kept
  };

  explicit FairBudget(size_t limit) : limit_(limit) {}
  FairBudget(const FairBudget&) = delete;
  FairBudget& operator=(const FairBudget&) = delete;

  // Charges `bytes` now when they fit and nobody waits before them.
  // Otherwise queues them, unless they exceed the limit, and sets *ticket
  // for Cancel(); `grant` runs once they are charged.
  Outcome Reserve(size_t bytes, std::function<void()> grant, uint64_t* ticket);

  // Gives up the queued reservation `ticket`. True when it was still
  // queued: nothing was charged and its grant never runs. False when it was
  // granted meanwhile: its bytes are charged (the caller releases them) and
  // its grant runs or has run.
  bool Cancel(uint64_t ticket);

  // Returns `bytes`, then grants the queued reservations that fit, in order.
  void Release(size_t bytes);

  size_t limit() const { return limit_; }
  size_t used() const;
  // Reservations queued now, and the bytes they ask for.
  size_t waiting() const;
  size_t waiting_bytes() const;

 private:
  struct Waiter {
    uint64_t ticket;
    size_t bytes;
    std::function<void()> grant;
  };
  // Charges the queued reservations that fit, from the front, and moves
  // their grants to *grants. REQUIRES: mu_ held.
  void GrantLocked(std::vector<std::function<void()>>* grants);

  const size_t limit_;
  mutable std::mutex mu_;
  size_t used_ = 0;             // guarded by mu_
  std::deque<Waiter> queue_;    // guarded by mu_
  size_t queued_bytes_ = 0;     // guarded by mu_
  uint64_t next_ticket_ = 1;    // guarded by mu_
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_MEMORY_BUDGET_H_
