// StreamReactor: one admitted Chunk, Dedup or Estimate stream, on gRPC's
// callback API (docs/design.md, "The reactor", "Tasks on the worker pool" and
// "Backpressure"). Flow control only: what a request means is the wire
// format's (wire_format.h) and Rpc's (stream_rpc.h); what a task does is the
// stream's work's (stream_work.h).
//
// Promises: callbacks never block; at most one task per stream is queued or
// running, so responses leave in the order of the input; reading pauses
// while max_inflight_bytes of input wait, kMaxQueuedResponses responses
// wait, the memory budget is full or the stream waits for its stream
// memory; the stream ends with the first failure once no write is in flight,
// gives its registry slot back as soon as it calls Finish, and returns all
// the memory it reserved however it ends.
//
// Thread safety: all state is guarded by mu_. gRPC operations (StartRead,
// StartWrite, Finish) are issued only from Drive(), by one thread at a time
// and never under mu_, because gRPC may run a reaction on the thread that
// started the operation. The reactor deletes itself once gRPC has called
// OnDone and no task, wake-up or Drive() holds a reference.
#ifndef CHUNKD_SERVICE_STREAM_REACTOR_H_
#define CHUNKD_SERVICE_STREAM_REACTOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "service/stream_registry.h"
#include "service/stream_work.h"
#include "service/wire_format.h"

namespace chunkd::service {

class ChunkServiceImpl;

// A stream refused before it took a slot: finishes at once, holds nothing.
class RefusedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedReactor(const absl::Status& status);
  void OnDone() override { delete this; }
};

// Rpc: ChunkRpc, DedupRpc or EstimateRpc (stream_rpc.h).
template <typename Rpc>
class StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public ActiveStream {
 public:
  using Request = typename Rpc::Request;

  // Registers the stream; when the registry refuses it, the stream finishes
  // at once with the refusal and holds no slot. `authorization` is the
  // client's metadata, for a namespace the stream names.
  StreamReactor(ChunkServiceImpl* service, std::string authorization,
                const StreamOwner& owner);
  ~StreamReactor() override;
  StreamReactor(const StreamReactor&) = delete;
  StreamReactor& operator=(const StreamReactor&) = delete;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  void Abort(const absl::Status& status) override;
  absl::Duration IdleFor(absl::Time now) override;

  // What the stream holds and waits for now: how tests observe its flow
  // control (never through time).
  struct State {
    bool reading = false;         // a read outstanding
    bool input_open = false;      // the client may still send
    bool task = false;            // a task queued or running
    size_t inbox_bytes = 0;       // input received, not yet processed
    size_t queued_responses = 0;  // the one being written included
    uint64_t requests_read = 0;   // requests that arrived so far
  };
  State state();

 private:
  // The next gRPC operation or task Drive() issues.
  enum class Op { kNone, kRead, kWrite, kFinish, kProcess };
  // How far the input has come.
  enum class Input {
    kOpen,        // more requests may come
    kEnded,       // the client half-closed: no read is started any more
    kSummarized,  // every byte processed and the summary queued
  };
  // How the stream ends.
  enum class Ending {
    kRunning,
    kFailed,    // final_status_ holds the first failure; Finish waits for
                // the write in flight
    kFinished,  // Finish(final_status_) issued (a failure, or OK)
  };
  // What Drive() is doing: one thread issues the operations, another that
  // comes meanwhile asks it to look again.
  enum class Driver { kIdle, kDriving, kDriveAgain };
  // The stream's reservation of ServiceOptions::stream_memory.
  enum class MemoryState { kNone, kQueued, kHeld, kReturned };
  // What the stream has started and not seen complete: at most one each.
  struct Outstanding {
    bool read = false;    // StartRead, until OnReadDone
    bool write = false;   // StartWrite of outbox_.front(), until OnWriteDone
    bool task = false;    // a Process task, queued or running
    bool budget = false;  // a wake-up from the memory budget
  };

  // Takes the request just parsed (request_ and its *data): parameters
  // first, then data. REQUIRES: mu_ held.
  void AcceptLocked(RequestData* data);
  // The first request: its params start the stream's work. False when the
  // stream failed. REQUIRES: mu_ held.
  bool StartLocked();
  // Returns the reservation the last read did not turn into charged bytes.
  // REQUIRES: mu_ held.
  void SettleReservationLocked(size_t kept);
  // Returns `bytes` of processed or dropped input to the budget.
  // REQUIRES: mu_ held.
  void UnchargeLocked(size_t bytes);
  // True when a read may start: its reservation is in the budget, or, if
  // the budget is full, the stream waits for a release to wake it.
  // REQUIRES: mu_ held.
  bool ReserveForReadLocked();
  // Reserves what the stream may hold beyond its request bytes, for its
  // parameters, before it reads or cuts more; when that does not fit yet
  // the stream waits its turn. False when it could never fit: the stream
  // failed. REQUIRES: mu_ held.
  bool ReserveStreamMemoryLocked();
  // The stream memory was granted: go on, on the pool.
  void GrantStreamMemory();
  // The stream finishes: its stream memory goes back, or it leaves the
  // queue. REQUIRES: mu_ held.
  void ReturnStreamMemoryLocked();
  // The budget has room again: try reading, on the pool.
  void WakeFromBudget();
  // Records the first failure; the stream finishes with it as soon as no
  // write is in flight. Queued responses and input are dropped.
  // REQUIRES: mu_ held.
  void FailLocked(const absl::Status& status);
  // Decides the next gRPC operation or task. REQUIRES: mu_ held.
  Op NextOpLocked();
  // Issues every operation the state calls for. Safe to call from any
  // thread that holds a reference (a reactor callback before OnDone, a
  // task).
  void Drive();
  // Gives the registry slot back, once. Never under mu_ (lock order:
  // registry, then stream).
  void ReleaseSlot();
  void Unref();
  // A task on the worker pool: runs the stream's work on up to
  // kMaxBytesPerTask of the inbox, and queues the responses.
  void Process();

  ChunkServiceImpl* const service_;
  const std::string authorization_;  // the client's metadata, for the ns
  grpc::ByteBuffer read_buffer_;     // written by gRPC while a read is out
  Request request_;                  // the last request, parsed
  uint64_t messages_read_ = 0;       // requests received so far
  std::unique_ptr<StreamWork> work_;  // used by the task
  std::atomic<bool> slot_held_{false};  // admitted, slot not yet released

  std::mutex mu_;
  std::deque<InputPiece> inbox_;         // received, not yet processed
  size_t inbox_bytes_ = 0;               // bytes in inbox_ and in the task
  std::deque<grpc::ByteBuffer> outbox_;  // front is written while pending
  absl::Time last_progress_;  // last read or write done, or task finished
  uint64_t requests_read_ = 0;  // messages_read_, for state()
  Outstanding outstanding_;
  Input input_ = Input::kOpen;
  Ending ending_ = Ending::kRunning;
  grpc::Status final_status_;
  Driver driver_ = Driver::kIdle;
  int refs_ = 0;  // Drive() calls, tasks and wake-ups in progress
  bool on_done_ = false;  // gRPC called OnDone
  size_t reserved_ = 0;  // budget reserved for the pending read
  size_t charged_ = 0;   // budget charged for bytes in inbox_ and the task
  MemoryState stream_memory_state_ = MemoryState::kNone;
  size_t stream_memory_ = 0;           // reserved, or asked for while queued
  uint64_t stream_memory_ticket_ = 0;  // while queued
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_REACTOR_H_
