#include "service/stream_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "platform/error_reason.h"
#include "service/chunk_service.h"
#include "service/memory_plan.h"
#include "service/status_util.h"
#include "service/stream_rpc.h"

namespace chunkd::service {

RefusedReactor::RefusedReactor(const absl::Status& status) {
  Finish(ToGrpcStatus(status));
}

template <typename Rpc>
StreamReactor<Rpc>::StreamReactor(ChunkServiceImpl* service,
                                  std::string authorization,
                                  const StreamOwner& owner)
    : service_(service),
      authorization_(std::move(authorization)),
      last_progress_(absl::Now()) {
  const Admission admission = service_->registry().Admit(this, owner);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (admission.status.ok()) {
      slot_held_.store(true);
      service_->options().metrics->active_streams().Increment();
    } else {
      service_->CountRejected(admission.reason);
      FailLocked(admission.status);
    }
  }
  Drive();
}

template <typename Rpc>
StreamReactor<Rpc>::~StreamReactor() {
  // Normally zero by now: every read completed and every task ran.
  if (MemoryBudget* memory = service_->options().memory) {
    memory->Release(reserved_ + charged_);
  }
  // The stream memory of a stream that failed while its task ran goes
  // back only now, once that task has let go of the chunker.
  std::lock_guard<std::mutex> lock(mu_);
  ReturnStreamMemoryLocked();
}

template <typename Rpc>
void StreamReactor<Rpc>::OnReadDone(bool ok) {
  absl::Status parsed;
  RequestData data;
  if (ok) {
    parsed = ParseStreamRequest(
        &read_buffer_, &request_, ++messages_read_,
        service_->options().max_message_bytes, &service_->buffers(), &data);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.read = false;
    last_progress_ = absl::Now();
    requests_read_ = messages_read_;
    if (!ok) {
      input_ = Input::kEnded;
      if (work_ == nullptr) {
        FailLocked(absl::InvalidArgumentError(
            "the stream ended before a request with params arrived"));
      }
    } else if (!parsed.ok()) {
      FailLocked(absl::InvalidArgumentError(
          absl::StrCat(parsed.message(), "; the stream is ended",
                       work_ != nullptr ? Rpc::kAfterFailure : "")));
    } else if (ending_ == Ending::kRunning) {
      AcceptLocked(&data);
    }
    request_.Clear();
    // Whatever AcceptLocked did not charge goes back to the budget.
    SettleReservationLocked(0);
  }
  // Data the stream did not take (it failed) goes back to the pool.
  service_->buffers().Give(std::move(data.bytes));
  Drive();
}

template <typename Rpc>
void StreamReactor<Rpc>::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outstanding_.write = false;
    last_progress_ = absl::Now();
    outbox_.pop_front();
    if (!ok) {
      FailLocked(absl::CancelledError("the client stopped receiving responses"));
    }
  }
  Drive();
}

template <typename Rpc>
void StreamReactor<Rpc>::OnCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(absl::CancelledError("the client cancelled the stream"));
  }
  Drive();
}

template <typename Rpc>
void StreamReactor<Rpc>::OnDone() {
  ReleaseSlot();
  bool destroy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_done_ = true;
    destroy = refs_ == 0;
  }
  if (destroy) delete this;
}

template <typename Rpc>
void StreamReactor<Rpc>::Abort(const absl::Status& status) {
  // Called under the registry's lock, so OnDone has not finished and
  // `this` is alive; the reference keeps it so until the task runs.
  {
    std::lock_guard<std::mutex> lock(mu_);
    FailLocked(status);
    ++refs_;
  }
  service_->options().pool->Submit([this] {
    Drive();
    Unref();
  });
}

template <typename Rpc>
absl::Duration StreamReactor<Rpc>::IdleFor(absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  // Waiting on the client means: a read or a write outstanding, and
  // nothing of chunkd's own to do for the stream.
  const bool waiting_on_client =
      (outstanding_.read || outstanding_.write) &&
      ending_ == Ending::kRunning && !outstanding_.task &&
      !outstanding_.budget && stream_memory_state_ != MemoryState::kQueued &&
      inbox_.empty();
  return waiting_on_client ? now - last_progress_ : absl::ZeroDuration();
}

template <typename Rpc>
typename StreamReactor<Rpc>::State StreamReactor<Rpc>::state() {
  std::lock_guard<std::mutex> lock(mu_);
  State state;
  state.reading = outstanding_.read;
  state.input_open = input_ == Input::kOpen;
  state.task = outstanding_.task;
  state.inbox_bytes = inbox_bytes_;
  state.queued_responses = outbox_.size();
  state.requests_read = requests_read_;
  return state;
}

template <typename Rpc>
bool StreamReactor<Rpc>::StartLocked() {
  const ServiceOptions& options = service_->options();
  if (!request_.has_params()) {
    FailLocked(absl::InvalidArgumentError(
        "the first request of a stream must carry params"));
    return false;
  }
  const std::string* ns = Rpc::Namespace(request_);
  if (options.auth != nullptr && ns != nullptr) {
    absl::Status allowed = options.auth->Authorize(authorization_, *ns);
    if (!allowed.ok()) {
      service_->CountRejected(RejectReason::kAuth);
      FailLocked(allowed);
      return false;
    }
  }
  auto work = Rpc::Start(request_, options);
  if (!work.ok()) {
    FailLocked(work.status());
    return false;
  }
  work_ = *std::move(work);
  return ReserveStreamMemoryLocked();
}

template <typename Rpc>
void StreamReactor<Rpc>::AcceptLocked(RequestData* data) {
  const ServiceOptions& options = service_->options();
  if (work_ == nullptr) {
    if (!StartLocked()) return;
  } else if (request_.has_params()) {
    FailLocked(absl::InvalidArgumentError(
        "params may be sent only in the first request of a stream"));
    return;
  }
  const size_t size = data->size;
  if (size > options.max_message_bytes) {
    FailLocked(WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "data of ", size, " bytes exceeds max_message_bytes (",
            options.max_message_bytes,
            "); send the stream in smaller messages")),
        ErrorReason::kMessageTooLarge));
    return;
  }
  const bool end_of_file = Rpc::EndsFile(request_);
  if (size == 0 && !end_of_file) return;
  inbox_bytes_ += size;
  if (options.memory != nullptr) {
    // The reservation of this read becomes the charge for its bytes.
    charged_ += size;
    reserved_ -= size;
  }
  inbox_.push_back(InputPiece{std::move(data->bytes), end_of_file});
}

template <typename Rpc>
void StreamReactor<Rpc>::SettleReservationLocked(size_t kept) {
  MemoryBudget* memory = service_->options().memory;
  if (memory == nullptr || reserved_ <= kept) return;
  const size_t unused = reserved_ - kept;
  reserved_ = kept;
  memory->Release(unused);
}

template <typename Rpc>
void StreamReactor<Rpc>::UnchargeLocked(size_t bytes) {
  MemoryBudget* memory = service_->options().memory;
  if (memory == nullptr) return;
  charged_ -= bytes;
  memory->Release(bytes);
}

template <typename Rpc>
bool StreamReactor<Rpc>::ReserveForReadLocked() {
  const ServiceOptions& options = service_->options();
  if (options.memory == nullptr) return true;
  if (outstanding_.budget) return false;
  const size_t bytes = options.max_message_bytes;
  ++refs_;  // kept by the wake-up until it runs
  if (options.memory->ReserveOrWait(bytes, [this] { WakeFromBudget(); })) {
    --refs_;
    reserved_ += bytes;
    return true;
  }
  outstanding_.budget = true;
  return false;
}

template <typename Rpc>
bool StreamReactor<Rpc>::ReserveStreamMemoryLocked() {
  const ServiceOptions& options = service_->options();
  if (options.stream_memory == nullptr) return true;
  stream_memory_ = work_->MemoryBytes(options.stream_settings);
  ++refs_;  // kept by the grant until it runs
  switch (options.stream_memory->Reserve(
      stream_memory_, [this] { GrantStreamMemory(); },
      &stream_memory_ticket_)) {
    case FairBudget::Outcome::kGranted:
      --refs_;
      stream_memory_state_ = MemoryState::kHeld;
      return true;
    case FairBudget::Outcome::kQueued:
      stream_memory_state_ = MemoryState::kQueued;
      return true;
    case FairBudget::Outcome::kTooLarge:
      break;
  }
  --refs_;
  FailLocked(work_->NeverFits(stream_memory_, options.stream_memory->limit()));
  return false;
}

// Never inline, as the granting thread may hold another stream's lock. The
// wait was chunkd's, not the client's: the idle clock starts again.
template <typename Rpc>
void StreamReactor<Rpc>::GrantStreamMemory() {
  service_->options().pool->Submit([this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stream_memory_state_ == MemoryState::kQueued) {
        stream_memory_state_ = MemoryState::kHeld;
        last_progress_ = absl::Now();
      }
    }
    Drive();
    Unref();
  });
}

template <typename Rpc>
void StreamReactor<Rpc>::ReturnStreamMemoryLocked() {
  FairBudget* memory = service_->options().stream_memory;
  if (stream_memory_state_ == MemoryState::kQueued) {
    if (memory->Cancel(stream_memory_ticket_)) {
      --refs_;  // the grant never runs (Drive() holds a reference)
    } else {
      memory->Release(stream_memory_);  // granted meanwhile
    }
  } else if (stream_memory_state_ == MemoryState::kHeld) {
    memory->Release(stream_memory_);
  } else {
    return;
  }
  stream_memory_state_ = MemoryState::kReturned;
}

// Never inline, as the releasing thread may hold another stream's lock.
template <typename Rpc>
void StreamReactor<Rpc>::WakeFromBudget() {
  service_->options().pool->Submit([this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      outstanding_.budget = false;
    }
    Drive();
    Unref();
  });
}

template <typename Rpc>
void StreamReactor<Rpc>::FailLocked(const absl::Status& status) {
  if (ending_ != Ending::kRunning) return;
  ending_ = Ending::kFailed;
  final_status_ = ToGrpcStatus(status);
  while (outbox_.size() > (outstanding_.write ? 1 : 0)) outbox_.pop_back();
  size_t dropped = 0;
  for (InputPiece& piece : inbox_) {
    dropped += piece.bytes.size();
    service_->buffers().Give(std::move(piece.bytes));
  }
  inbox_.clear();
  inbox_bytes_ -= dropped;
  UnchargeLocked(dropped);
}

template <typename Rpc>
typename StreamReactor<Rpc>::Op StreamReactor<Rpc>::NextOpLocked() {
  if (ending_ == Ending::kFinished) return Op::kNone;
  if (ending_ == Ending::kFailed) {
    if (outstanding_.write) return Op::kNone;
    ending_ = Ending::kFinished;
    // A read still pending completes without data now; its reservation
    // goes back at once, not when gRPC gets round to OnDone.
    SettleReservationLocked(0);
    // A task still running holds the chunker until it ends: then the
    // destructor returns the stream memory.
    if (!outstanding_.task) ReturnStreamMemoryLocked();
    return Op::kFinish;
  }
  if (!outstanding_.write && !outbox_.empty()) {
    outstanding_.write = true;
    return Op::kWrite;
  }
  if (!outstanding_.write && outbox_.empty() &&
      input_ == Input::kSummarized) {
    ending_ = Ending::kFinished;
    final_status_ = grpc::Status::OK;
    ReturnStreamMemoryLocked();
    return Op::kFinish;
  }
  // Waiting for its stream memory, the stream neither reads nor cuts.
  if (stream_memory_state_ == MemoryState::kQueued) return Op::kNone;
  if (!outstanding_.read && input_ == Input::kOpen &&
      inbox_bytes_ < service_->options().max_inflight_bytes &&
      outbox_.size() < kMaxQueuedResponses && ReserveForReadLocked()) {
    outstanding_.read = true;
    return Op::kRead;
  }
  if (!outstanding_.task && work_ != nullptr &&
      input_ != Input::kSummarized &&
      (!inbox_.empty() || input_ == Input::kEnded)) {
    outstanding_.task = true;
    ++refs_;
    return Op::kProcess;
  }
  return Op::kNone;
}

template <typename Rpc>
void StreamReactor<Rpc>::Drive() {
  std::unique_lock<std::mutex> lock(mu_);
  if (driver_ != Driver::kIdle) {
    driver_ = Driver::kDriveAgain;
    return;
  }
  ++refs_;
  for (;;) {
    driver_ = Driver::kDriving;
    const Op op = NextOpLocked();
    if (op == Op::kNone) {
      if (driver_ == Driver::kDriveAgain) continue;
      break;
    }
    const grpc::Status status = final_status_;
    lock.unlock();
    switch (op) {
      case Op::kRead:
        this->StartRead(&read_buffer_);
        break;
      case Op::kWrite:
        // The front stays put until OnWriteDone pops it.
        this->StartWrite(&outbox_.front());
        break;
      case Op::kFinish:
        this->Finish(status);
        // The stream does no more work: its slot is free for another (a
        // call the client reset may wait long for its OnDone while gRPC
        // works through a backlog).
        ReleaseSlot();
        break;
      case Op::kProcess:
        service_->options().pool->Submit([this] { Process(); });
        break;
      case Op::kNone:
        break;
    }
    lock.lock();
  }
  driver_ = Driver::kIdle;
  const bool destroy = --refs_ == 0 && on_done_;
  lock.unlock();
  if (destroy) delete this;
}

template <typename Rpc>
void StreamReactor<Rpc>::ReleaseSlot() {
  if (!slot_held_.exchange(false)) return;
  service_->registry().Remove(this);
  service_->options().metrics->active_streams().Decrement();
}

template <typename Rpc>
void StreamReactor<Rpc>::Unref() {
  bool destroy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    destroy = --refs_ == 0 && on_done_;
  }
  if (destroy) delete this;
}

template <typename Rpc>
void StreamReactor<Rpc>::Process() {
  TaskInput input;
  input.buffers = &service_->buffers();
  input.input_waits = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return !inbox_.empty();
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!inbox_.empty() && input.bytes < kMaxBytesPerTask) {
      input.bytes += inbox_.front().bytes.size();
      input.pieces.push_back(std::move(inbox_.front()));
      inbox_.pop_front();
    }
    input.last = input_ != Input::kOpen && inbox_.empty() &&
                 ending_ == Ending::kRunning;
  }
  std::deque<grpc::ByteBuffer> responses;
  const absl::Status status = work_->Run(&input, &responses);
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_bytes_ -= input.bytes;
    UnchargeLocked(input.bytes);
    outstanding_.task = false;
    last_progress_ = absl::Now();
    if (!status.ok()) {
      FailLocked(status);
    } else if (ending_ == Ending::kRunning) {
      for (grpc::ByteBuffer& r : responses) outbox_.push_back(std::move(r));
      if (input.last) input_ = Input::kSummarized;
    }
  }
  Drive();
  Unref();
}

template class StreamReactor<ChunkRpc>;
template class StreamReactor<DedupRpc>;
template class StreamReactor<EstimateRpc>;

}  // namespace chunkd::service
