#include "service/chunk_service.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "chunkd/chunker.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "pipeline/stream_pipeline.h"
#include "platform/error_reason.h"
#include "service/memory_plan.h"
#include "service/params.h"
#include "service/request_bytes.h"
#include "service/status_util.h"

namespace chunkd::service {
namespace {

// kMaxRecordsPerResponse (service/memory_plan.h): keeps a response far
// below gRPC's message limit (a record is at most ~56 bytes) while
// amortizing per-message costs. kMaxQueuedResponses: unsent responses at
// which reading pauses (a client that does not read). kMaxBytesPerTask:
// input bytes one task processes before yielding the worker to other
// streams.
// Request data buffers the service keeps for reuse, at least.
constexpr size_t kMaxKeptBufferBytes = size_t{16} << 20;
// Most fingerprints in one FindMissing request.
constexpr int kMaxFindMissingFingerprints = 10000;
// Most fingerprints in one Release request.
constexpr int kMaxReleaseFingerprints = 10000;

// At most `max` fingerprints of `digest_size` bytes each (0: 32 or 16);
// INVALID_ARGUMENT naming the first bad entry otherwise.
absl::Status ValidateFingerprintList(
    const google::protobuf::RepeatedPtrField<std::string>& fingerprints,
    int max, size_t digest_size) {
  if (fingerprints.size() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("fingerprints has ", fingerprints.size(),
                     " entries; at most ", max, " per request"));
  }
  for (int i = 0; i < fingerprints.size(); ++i) {
    const size_t size = fingerprints.Get(i).size();
    if (digest_size == 0 && size != 16 && size != 32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fingerprints[", i, "] has ", size,
          " bytes; a fingerprint has 32 (sha256) or 16 (xxh128) bytes"));
    }
    if (digest_size != 0 && size != digest_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fingerprints[", i, "] has ", size, " bytes; fingerprints of ",
          digest_size == 32 ? "sha256" : "xxh128", " have ", digest_size,
          " bytes"));
    }
  }
  return absl::OkStatus();
}

// The client's `authorization` metadata, empty when absent.
std::string AuthorizationOf(const grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// INVALID_ARGUMENT saying which message of the call (`position`, counted
// from 1; 0 for a unary call's only request) did not parse as `message`'s
// type, and its size.
absl::Status NotParsed(const google::protobuf::Message& message,
                       uint64_t position, size_t size) {
  const std::string which =
      position == 0 ? std::string("the request")
                    : absl::StrCat("request message ", position,
                                   " of the stream (counting from 1)");
  return absl::InvalidArgumentError(absl::StrCat(
      which, " is not a valid ", message.GetTypeName(), ": its ", size,
      " bytes do not parse as protobuf"));
}

// Parses one request: OK, or NotParsed(). `buffer` is consumed.
absl::Status ParseRequest(grpc::ByteBuffer* buffer,
                          google::protobuf::Message* message,
                          uint64_t position) {
  const size_t size = buffer->Length();
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(buffer);
    parsed = message->ParseFromZeroCopyStream(&reader);
  }
  buffer->Clear();
  return parsed ? absl::OkStatus() : NotParsed(*message, position, size);
}

// The data field of a stream request, kept apart from the message.
struct RequestData {
  size_t size = 0;    // the field's length
  std::string bytes;  // its bytes, unless longer than the stream accepts
};

// Parses one stream request (ChunkRequest or DedupRequest) with the result
// and errors of ParseRequest, except that the data field goes to *data:
// copied once from gRPC's slices into a buffer from `pool`
// (request_bytes.h), or only measured when longer than `max_bytes`. A
// message SplitRequest leaves to protobuf is parsed whole. `buffer` is
// consumed.
template <typename Request>
absl::Status ParseStreamRequest(grpc::ByteBuffer* buffer, Request* message,
                                uint64_t position, size_t max_bytes,
                                BufferPool* pool, RequestData* data) {
  std::vector<grpc::Slice> slices;
  std::vector<absl::string_view> pieces;
  RequestParts parts;
  bool split = buffer->Dump(&slices).ok();
  if (split) {
    pieces.reserve(slices.size());
    for (const grpc::Slice& slice : slices) {
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                          slice.size());
    }
    split = SplitRequest(pieces, &parts);
  }
  if (!split) {
    absl::Status parsed = ParseRequest(buffer, message, position);
    data->size = message->data().size();
    data->bytes = std::move(*message->mutable_data());
    return parsed;
  }
  const size_t size = buffer->Length();
  if (!parts.others.empty() && !message->ParseFromString(parts.others)) {
    buffer->Clear();
    return NotParsed(*message, position, size);
  }
  data->size = parts.data_size;
  if (parts.data_size > 0 && parts.data_size <= max_bytes) {
    data->bytes = pool->Take(parts.data_size);
    CopyBytes(pieces, parts.data_offset, parts.data_size, &data->bytes);
  }
  buffer->Clear();
  return absl::OkStatus();
}

// Serializes a response; a failure is INTERNAL (never expected).
absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<
      google::protobuf::Message>::Serialize(message, buffer, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize ",
                                          message.GetTypeName(), ": ",
                                          status.error_message()));
}

// A stream refused before it took a slot: finishes at once, holds nothing.
class RefusedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedReactor(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

// The options both streams share: chunking, fingerprint, engine.
absl::StatusOr<pipeline::PipelineOptions> StreamOptions(
    const v1::ChunkingParams& chunking_params,
    v1::FingerprintAlgorithm fingerprint, const ServiceOptions& service) {
  pipeline::PipelineOptions o;
  o.engine = service.engine;
  o.stages = &service.metrics->stages();
  auto chunking = ChunkerOptionsFromProto(chunking_params);
  if (!chunking.ok()) return chunking.status();
  o.chunking = *chunking;
  auto fp = FingerprintFromProto(fingerprint);
  if (!fp.ok()) return fp.status();
  o.fingerprint = *fp;
  return o;
}

// What distinguishes Chunk from Dedup; everything else is shared.
struct ChunkRpc {
  using Request = v1::ChunkRequest;
  using Response = v1::ChunkResponse;
  static constexpr const char* kMethod = "Chunk";
  // What a client should know when the stream fails midway.
  static constexpr const char* kAfterFailure = "";
  // The namespace the stream writes to, checked against the caller's token.
  static const std::string* Namespace(const Request&) { return nullptr; }

  static absl::StatusOr<pipeline::PipelineOptions> Options(
      const Request& request, const ServiceOptions& service) {
    return StreamOptions(request.params().chunking(),
                         request.params().fingerprint(), service);
  }
  static void AddRecord(const pipeline::ChunkRecord& r, Response* response) {
    v1::ChunkRecord* out = response->mutable_batch()->add_chunks();
    out->set_offset(r.offset);
    out->set_length(r.length);
    out->set_fingerprint(r.fingerprint);
  }
  static void SetSummary(const pipeline::StreamTotals& t, Response* response) {
    v1::ChunkSummary* s = response->mutable_summary();
    s->set_total_bytes(t.bytes);
    s->set_total_chunks(t.chunks);
  }
};

struct DedupRpc {
  using Request = v1::DedupRequest;
  using Response = v1::DedupResponse;
  static constexpr const char* kMethod = "Dedup";
  static constexpr const char* kAfterFailure =
      " (chunks it committed stay committed: retry the whole stream with the "
      "same stream_id to count each chunk once)";
  static const std::string* Namespace(const Request& request) {
    return &request.params().namespace_();
  }

  static absl::StatusOr<pipeline::PipelineOptions> Options(
      const Request& request, const ServiceOptions& service) {
    absl::Status ns = index::ValidateNamespace(request.params().namespace_());
    if (!ns.ok()) return ns;
    auto o = StreamOptions(request.params().chunking(),
                           request.params().fingerprint(), service);
    if (!o.ok()) return o.status();
    const std::string& stream_id = request.params().stream_id();
    if (!stream_id.empty()) {
      absl::Status valid = index::ValidateWriteToken({stream_id, 0});
      if (!valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("params.", valid.message()));
      }
    }
    o->index = service.index;
    o->ns = request.params().namespace_();
    auto hints = HintTestFromProto(request.params().hints(),
                                   o->chunking.algorithm);
    if (!hints.ok()) return hints.status();
    o->hints = *hints;
    o->hint_cache = service.hint_cache;
    o->hint_cache_all_chunks = service.hint_cache_all_chunks;
    o->stream_id = stream_id;
    return o;
  }
  static void AddRecord(const pipeline::ChunkRecord& r, Response* response) {
    v1::DedupRecord* out = response->mutable_batch()->add_chunks();
    out->set_offset(r.offset);
    out->set_length(r.length);
    out->set_fingerprint(r.fingerprint);
    out->set_is_new(r.is_new);
  }
  static void SetSummary(const pipeline::StreamTotals& t, Response* response) {
    v1::DedupSummary* s = response->mutable_summary();
    s->set_total_bytes(t.bytes);
    s->set_total_chunks(t.chunks);
    s->set_unique_bytes(t.unique_bytes);
    s->set_unique_chunks(t.unique_chunks);
    s->set_hints_tried(t.hints_tried);
    s->set_hints_accepted(t.hints_accepted);
    s->set_hints_rejected(t.hints_rejected);
    s->set_hint_skipped_bytes(t.hint_skipped_bytes);
  }
};

// One admitted Chunk or Dedup stream.
//
// All state is guarded by mu_. gRPC operations (StartRead, StartWrite,
// Finish) are issued only from Drive(), one thread at a time and never under
// mu_, because gRPC may run a reaction on the thread that started the
// operation. The reactor deletes itself once gRPC has called OnDone and no
// task or Drive() holds a reference.
template <typename Rpc>
class StreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public ActiveStream {
 public:
  using Request = typename Rpc::Request;
  using Response = typename Rpc::Response;

  // Registers the stream; when the registry refuses it, the stream finishes
  // at once with the refusal and holds no slot.
  StreamReactor(ChunkServiceImpl* service, std::string authorization,
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

  ~StreamReactor() override {
    // Normally zero by now: every read completed and every task ran.
    if (MemoryBudget* memory = service_->options().memory) {
      memory->Release(reserved_ + charged_);
    }
    // The stream memory of a stream that failed while its task ran goes
    // back only now, once that task has let go of the chunker.
    std::lock_guard<std::mutex> lock(mu_);
    ReturnStreamMemoryLocked();
  }

  void OnReadDone(bool ok) override {
    absl::Status parsed;
    RequestData data;
    if (ok) {
      parsed = ParseStreamRequest(
          &read_buffer_, &request_, ++messages_read_,
          service_->options().max_message_bytes, &service_->buffers(), &data);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_pending_ = false;
      last_progress_ = absl::Now();
      if (!ok) {
        read_eof_ = true;
        if (pipeline_ == nullptr) {
          FailLocked(absl::InvalidArgumentError(
              "the stream ended before a request with params arrived"));
        }
      } else if (!parsed.ok()) {
        FailLocked(absl::InvalidArgumentError(
            absl::StrCat(parsed.message(), "; the stream is ended",
                         pipeline_ != nullptr ? Rpc::kAfterFailure : "")));
      } else if (!failed_) {
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

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_pending_ = false;
      last_progress_ = absl::Now();
      outbox_.pop_front();
      if (!ok) {
        FailLocked(absl::CancelledError(
            "the client stopped receiving responses"));
      }
    }
    Drive();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      FailLocked(absl::CancelledError("the client cancelled the stream"));
    }
    Drive();
  }

  void OnDone() override {
    ReleaseSlot();
    bool destroy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      on_done_ = true;
      destroy = refs_ == 0;
    }
    if (destroy) delete this;
  }

  void Abort(const absl::Status& status) override {
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

  absl::Duration IdleFor(absl::Time now) override {
    std::lock_guard<std::mutex> lock(mu_);
    // Waiting on the client means: a read or a write outstanding, and
    // nothing of chunkd's own to do for the stream.
    const bool waiting_on_client =
        (read_pending_ || write_pending_) && !failed_ && !finish_called_ &&
        !task_running_ && !budget_waiting_ &&
        stream_memory_state_ != MemoryState::kQueued && inbox_.empty();
    return waiting_on_client ? now - last_progress_ : absl::ZeroDuration();
  }

 private:
  enum class Op { kNone, kRead, kWrite, kFinish, kProcess };
  // The stream's reservation of ServiceOptions::stream_memory.
  enum class MemoryState { kNone, kQueued, kHeld, kReturned };

  // Takes the request just parsed (request_ and its *data): parameters
  // first, then data.
  void AcceptLocked(RequestData* data) {
    const ServiceOptions& options = service_->options();
    if (pipeline_ == nullptr) {
      if (!request_.has_params()) {
        FailLocked(absl::InvalidArgumentError(
            "the first request of a stream must carry params"));
        return;
      }
      const std::string* ns = Rpc::Namespace(request_);
      if (options.auth != nullptr && ns != nullptr) {
        absl::Status allowed = options.auth->Authorize(authorization_, *ns);
        if (!allowed.ok()) {
          service_->CountRejected(RejectReason::kAuth);
          FailLocked(allowed);
          return;
        }
      }
      auto pipeline_options = Rpc::Options(request_, options);
      if (!pipeline_options.ok()) {
        FailLocked(pipeline_options.status());
        return;
      }
      auto pipeline = pipeline::StreamPipeline::Create(*pipeline_options);
      if (!pipeline.ok()) {
        FailLocked(pipeline.status());
        return;
      }
      pipeline_ = *std::move(pipeline);
      if (!ReserveStreamMemoryLocked(*pipeline_options)) return;
      counters_ = options.metrics->ForStream(
          Rpc::kMethod,
          chunking::AlgorithmName(pipeline_options->chunking.algorithm));
      if (pipeline_options->hints != pipeline::HintTest::kOff) {
        options.metrics->ForHints(
            pipeline::HintTestName(pipeline_options->hints), &counters_);
      }
    } else if (request_.has_params()) {
      FailLocked(absl::InvalidArgumentError(
          "params may be sent only in the first request of a stream"));
      return;
    }
    const size_t size = data->size;
    if (size > options.max_message_bytes) {
      FailLocked(WithReason(absl::ResourceExhaustedError(
          absl::StrCat("data of ", size, " bytes exceeds max_message_bytes (",
                       options.max_message_bytes,
                       "); send the stream in smaller messages")),
          ErrorReason::kMessageTooLarge));
      return;
    }
    if (size == 0) return;
    inbox_bytes_ += size;
    if (options.memory != nullptr) {
      // The reservation of this read becomes the charge for its bytes.
      charged_ += size;
      reserved_ -= size;
    }
    inbox_.push_back(std::move(data->bytes));
  }

  // Returns the reservation the last read did not turn into charged bytes.
  // REQUIRES: mu_ held.
  void SettleReservationLocked(size_t kept) {
    MemoryBudget* memory = service_->options().memory;
    if (memory == nullptr || reserved_ <= kept) return;
    const size_t unused = reserved_ - kept;
    reserved_ = kept;
    memory->Release(unused);
  }

  // Returns `bytes` of processed or dropped input to the budget.
  // REQUIRES: mu_ held.
  void UnchargeLocked(size_t bytes) {
    MemoryBudget* memory = service_->options().memory;
    if (memory == nullptr) return;
    charged_ -= bytes;
    memory->Release(bytes);
  }

  // True when a read may start: its reservation is in the budget, or, if the
  // budget is full, the stream waits for a release to wake it.
  // REQUIRES: mu_ held.
  bool ReserveForReadLocked() {
    const ServiceOptions& options = service_->options();
    if (options.memory == nullptr) return true;
    if (budget_waiting_) return false;
    const size_t bytes = options.max_message_bytes;
    ++refs_;  // kept by the wake-up until it runs
    if (options.memory->ReserveOrWait(bytes, [this] { WakeFromBudget(); })) {
      --refs_;
      reserved_ += bytes;
      return true;
    }
    budget_waiting_ = true;
    return false;
  }

  // Reserves what the stream may hold beyond its request bytes, for its
  // parameters, before it reads or cuts more; when that does not fit yet the
  // stream waits its turn. False when it could never fit: the stream failed.
  // REQUIRES: mu_ held.
  bool ReserveStreamMemoryLocked(const pipeline::PipelineOptions& o) {
    const ServiceOptions& options = service_->options();
    if (options.stream_memory == nullptr) return true;
    const StreamShape shape =
        ShapeOf(o.chunking, o.hints != pipeline::HintTest::kOff);
    stream_memory_ = StreamMemoryBytes(shape, options.stream_settings);
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
    FailLocked(WithReason(absl::ResourceExhaustedError(absl::StrCat(
        "the stream's chunking parameters need up to ", stream_memory_,
        " bytes of memory (chunks final after ", shape.final_size,
        " bytes, the smallest ", shape.smallest_chunk,
        " bytes), more than all of --stream_memory_budget (",
        options.stream_memory->limit(),
        "): it could never start here; choose a smaller max_size "
        "(repmaxcdc: min_size and horizon_size) or a larger min_size")),
        ErrorReason::kStreamMemory));
    return false;
  }

  // The stream memory was granted: go on, on the pool (never inline, as the
  // granting thread may hold another stream's lock). The wait was chunkd's,
  // not the client's: the idle clock starts again.
  void GrantStreamMemory() {
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

  // The stream finishes: its stream memory goes back, or it leaves the
  // queue. REQUIRES: mu_ held.
  void ReturnStreamMemoryLocked() {
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

  // The budget has room again: try reading on the pool (never inline, as the
  // releasing thread may hold another stream's lock).
  void WakeFromBudget() {
    service_->options().pool->Submit([this] {
      {
        std::lock_guard<std::mutex> lock(mu_);
        budget_waiting_ = false;
      }
      Drive();
      Unref();
    });
  }

  // Records the first failure; the stream finishes with it as soon as no
  // write is in flight. Queued responses are dropped.
  void FailLocked(const absl::Status& status) {
    if (failed_ || finish_called_) return;
    failed_ = true;
    final_status_ = ToGrpcStatus(status);
    while (outbox_.size() > (write_pending_ ? 1 : 0)) outbox_.pop_back();
    size_t dropped = 0;
    for (std::string& piece : inbox_) {
      dropped += piece.size();
      service_->buffers().Give(std::move(piece));
    }
    inbox_.clear();
    inbox_bytes_ -= dropped;
    UnchargeLocked(dropped);
  }

  // Decides the next gRPC operation or task. REQUIRES: mu_ held.
  Op NextOpLocked() {
    if (finish_called_) return Op::kNone;
    if (failed_) {
      if (write_pending_) return Op::kNone;
      finish_called_ = true;
      // A read still pending completes without data now; its reservation
      // goes back at once, not when gRPC gets round to OnDone.
      SettleReservationLocked(0);
      // A task still running holds the chunker until it ends: then the
      // destructor returns the stream memory.
      if (!task_running_) ReturnStreamMemoryLocked();
      return Op::kFinish;
    }
    if (!write_pending_ && !outbox_.empty()) {
      write_pending_ = true;
      return Op::kWrite;
    }
    if (!write_pending_ && outbox_.empty() && processed_all_) {
      finish_called_ = true;
      final_status_ = grpc::Status::OK;
      ReturnStreamMemoryLocked();
      return Op::kFinish;
    }
    // Waiting for its stream memory, the stream neither reads nor cuts.
    if (stream_memory_state_ == MemoryState::kQueued) return Op::kNone;
    const size_t limit = service_->options().max_inflight_bytes;
    if (!read_pending_ && !read_eof_ && inbox_bytes_ < limit &&
        outbox_.size() < kMaxQueuedResponses && ReserveForReadLocked()) {
      read_pending_ = true;
      return Op::kRead;
    }
    if (!task_running_ && pipeline_ != nullptr && !processed_all_ &&
        (!inbox_.empty() || read_eof_)) {
      task_running_ = true;
      ++refs_;
      return Op::kProcess;
    }
    return Op::kNone;
  }

  // Issues every operation the state calls for. Safe to call from any thread
  // that holds a reference (a reactor callback before OnDone, a task).
  void Drive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (driving_) {
      redrive_ = true;
      return;
    }
    driving_ = true;
    ++refs_;
    for (;;) {
      redrive_ = false;
      const Op op = NextOpLocked();
      if (op == Op::kNone) {
        if (redrive_) continue;
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
          // The stream does no more work: its slot is free for another
          // (a call the client reset may wait long for its OnDone while
          // gRPC works through a backlog).
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
    driving_ = false;
    const bool destroy = --refs_ == 0 && on_done_;
    lock.unlock();
    if (destroy) delete this;
  }

  // Gives the registry slot back, once. Never under mu_ (lock order:
  // registry, then stream).
  void ReleaseSlot() {
    if (!slot_held_.exchange(false)) return;
    service_->registry().Remove(this);
    service_->options().metrics->active_streams().Decrement();
  }

  void Unref() {
    bool destroy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      destroy = --refs_ == 0 && on_done_;
    }
    if (destroy) delete this;
  }

  // A task on the worker pool: cuts, fingerprints and indexes up to
  // kMaxBytesPerTask of the inbox, and queues the responses.
  void Process() {
    std::vector<std::string> pieces;
    size_t taken = 0;
    bool last = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!inbox_.empty() && taken < kMaxBytesPerTask) {
        taken += inbox_.front().size();
        pieces.push_back(std::move(inbox_.front()));
        inbox_.pop_front();
      }
      last = read_eof_ && inbox_.empty() && !failed_;
    }
    std::vector<pipeline::ChunkRecord> records;
    absl::Status status;
    const uint64_t chunks_before = pipeline_->totals().chunks;
    const uint64_t unique_before = pipeline_->totals().unique_bytes;
    const uint64_t unique_chunks_before = pipeline_->totals().unique_chunks;
    const pipeline::StreamTotals hints_before = pipeline_->totals();
    for (std::string& piece : pieces) {
      if (status.ok()) status = pipeline_->Process(piece, &records);
      service_->buffers().Give(std::move(piece));
    }
    if (status.ok() && last) status = pipeline_->Finish(&records);
    // Tells the pipeline when no input waits: it decides when to commit to
    // the index (docs/design.md, "Index batches and records").
    if (status.ok() && !last) {
      bool more_waiting;
      {
        std::lock_guard<std::mutex> lock(mu_);
        more_waiting = !inbox_.empty();
      }
      if (!more_waiting) status = pipeline_->NoInputWaiting(&records);
    }

    // Serialized here, on the worker, not on gRPC's thread.
    std::deque<grpc::ByteBuffer> responses;
    Response response;
    for (size_t i = 0; status.ok() && i < records.size();
         i += kMaxRecordsPerResponse) {
      response.Clear();
      response.mutable_batch()->mutable_chunks()->Reserve(
          static_cast<int>(std::min(kMaxRecordsPerResponse, records.size() - i)));
      const size_t end = std::min(records.size(), i + kMaxRecordsPerResponse);
      for (size_t j = i; j < end; ++j) Rpc::AddRecord(records[j], &response);
      status = SerializeResponse(response, &responses.emplace_back());
    }
    const pipeline::StreamTotals& totals = pipeline_->totals();
    if (status.ok() && last) {
      response.Clear();
      Rpc::SetSummary(totals, &response);
      status = SerializeResponse(response, &responses.emplace_back());
    }

    counters_.ingest_bytes->Increment(static_cast<double>(taken));
    counters_.chunks->Increment(
        static_cast<double>(totals.chunks - chunks_before));
    if (counters_.duplicate_bytes != nullptr) {
      uint64_t bytes = 0;
      for (const auto& r : records) bytes += r.length;
      const uint64_t new_chunks = totals.unique_chunks - unique_chunks_before;
      counters_.duplicate_bytes->Increment(
          static_cast<double>(bytes - (totals.unique_bytes - unique_before)));
      counters_.duplicate_chunks->Increment(
          static_cast<double>(records.size() - new_chunks));
    }
    if (counters_.hints_accepted != nullptr) {
      counters_.hints_accepted->Increment(static_cast<double>(
          totals.hints_accepted - hints_before.hints_accepted));
      counters_.hints_rejected->Increment(static_cast<double>(
          totals.hints_rejected - hints_before.hints_rejected));
      counters_.hint_skipped_bytes->Increment(static_cast<double>(
          totals.hint_skipped_bytes - hints_before.hint_skipped_bytes));
      counters_.hint_cache_hits->Increment(
          static_cast<double>(totals.cache_hits - hints_before.cache_hits));
      counters_.hint_cache_misses->Increment(
          static_cast<double>(totals.cache_misses - hints_before.cache_misses));
    }

    {
      std::lock_guard<std::mutex> lock(mu_);
      inbox_bytes_ -= taken;
      UnchargeLocked(taken);
      task_running_ = false;
      last_progress_ = absl::Now();
      if (!status.ok()) {
        FailLocked(status);
      } else if (!failed_) {
        for (grpc::ByteBuffer& r : responses) outbox_.push_back(std::move(r));
        if (last) processed_all_ = true;
      }
    }
    Drive();
    Unref();
  }

  ChunkServiceImpl* const service_;
  const std::string authorization_;  // the client's metadata, for Dedup's ns
  grpc::ByteBuffer read_buffer_;  // written by gRPC while read_pending_
  Request request_;               // the last request, parsed
  uint64_t messages_read_ = 0;    // requests received so far
  std::unique_ptr<pipeline::StreamPipeline> pipeline_;  // used by the task
  metrics::StreamCounters counters_;

  std::mutex mu_;
  std::deque<std::string> inbox_;    // received, not yet processed
  size_t inbox_bytes_ = 0;           // bytes in inbox_ and in the task
  std::deque<grpc::ByteBuffer> outbox_;  // front is written while pending
  absl::Time last_progress_;  // last read or write done, or task finished
  std::atomic<bool> slot_held_{false};  // admitted, slot not yet released
  bool read_pending_ = false;
  bool read_eof_ = false;
  bool write_pending_ = false;
  bool task_running_ = false;
  bool processed_all_ = false;  // the summary is queued
  bool failed_ = false;
  bool finish_called_ = false;
  bool on_done_ = false;
  bool driving_ = false;
  bool redrive_ = false;
  bool budget_waiting_ = false;  // a wake-up from the budget is pending
  size_t reserved_ = 0;  // budget reserved for the pending read
  size_t charged_ = 0;   // budget charged for bytes in inbox_ and the task
  MemoryState stream_memory_state_ = MemoryState::kNone;
  size_t stream_memory_ = 0;           // reserved, or asked for while queued
  uint64_t stream_memory_ticket_ = 0;  // while queued
  int refs_ = 0;  // Drive() calls, tasks and wake-ups in progress
  grpc::Status final_status_;
};

// Release's checks beyond the namespace: the fingerprint algorithm, the
// list, the request id.
absl::Status ValidateRelease(const v1::ReleaseRequest& r) {
  auto kind = FingerprintFromProto(r.fingerprint());
  if (!kind.ok()) return kind.status();
  if (*kind == fingerprint::Kind::kNone) {
    return absl::InvalidArgumentError(
        "fingerprint NONE cannot be used with Release: name the algorithm "
        "the fingerprints were computed with");
  }
  absl::Status valid = ValidateFingerprintList(
      r.fingerprints(), kMaxReleaseFingerprints, fingerprint::DigestSize(*kind));
  if (!valid.ok() || r.request_id().empty()) return valid;
  absl::Status token = index::ValidateWriteToken({r.request_id(), 0});
  if (token.ok()) return token;
  // The index calls it stream_id; the API calls it request_id.
  return absl::InvalidArgumentError(absl::StrCat(
      "request_id", absl::StripPrefix(token.message(), "stream_id")));
}

// Serves one unary call: parses the request (INVALID_ARGUMENT when it does
// not parse), runs `validate` on gRPC's thread and `run` (which may reach a
// remote index) on the pool when `pool_calls` is given (which counts it
// until it answered), else inline, then sends the response.
// `validate(const Request&)` returns absl::Status; `run(const Request&,
// Response*)` returns absl::Status.
template <typename Request, typename Response, typename Validate,
          typename Run>
grpc::ServerUnaryReactor* ServeUnary(const ServiceOptions& options,
                                     grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response,
                                     Validate validate, Run run,
                                     PoolCalls* pool_calls) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (options.guard != nullptr && options.guard->OverRate(context->peer())) {
    reactor->Finish(ToGrpcStatus(options.guard->RateError("calls")));
    return reactor;
  }
  struct Call {
    Request request;
    Response response;
  };
  auto call = std::make_shared<Call>();
  grpc::ByteBuffer request_bytes(*raw_request);  // shares the slices
  absl::Status valid = ParseRequest(&request_bytes, &call->request, 0);
  if (valid.ok()) valid = validate(call->request);
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  auto respond = [reactor, raw_response, call, run] {
    absl::Status status = run(call->request, &call->response);
    if (status.ok()) status = SerializeResponse(call->response, raw_response);
    reactor->Finish(ToGrpcStatus(status));
  };
  if (pool_calls != nullptr) {
    pool_calls->Enter();
    options.pool->Submit([respond = std::move(respond), pool_calls] {
      respond();
      pool_calls->Exit();
    });
  } else {
    respond();
  }
  return reactor;
}

}  // namespace

ChunkServiceImpl::ChunkServiceImpl(ServiceOptions options)
    : options_(std::move(options)),
      registry_(options_.limits),
      // A task's worth of messages for a few tasks: what the streams give
      // back between two reads, so that reads rarely allocate.
      buffers_(std::max(kMaxKeptBufferBytes, 4 * options_.max_message_bytes)),
      idle_reaper_(
          // Often enough that an idle stream ends within a quarter of the
          // timeout (and at most a second) after it is due.
          std::clamp(options_.stream_idle_timeout / 4, absl::Milliseconds(50),
                     absl::Seconds(1)),
          [this] { ExpireIdleStreams(absl::Now()); }) {
  for (RejectReason reason : kAllRejectReasons) {
    rejected_[static_cast<size_t>(reason)] =
        &options_.metrics->StreamsRejected(RejectReasonLabel(reason));
  }
  if (options_.stream_idle_timeout > absl::ZeroDuration()) {
    idle_reaper_.Start();
  }
}

ChunkServiceImpl::~ChunkServiceImpl() { idle_reaper_.Stop(); }

void ChunkServiceImpl::CountRejected(RejectReason reason) {
  rejected_[static_cast<size_t>(reason)]->Increment();
}

absl::Status ChunkServiceImpl::PreAdmit(
    const grpc::CallbackServerContext* context, RejectReason* reason) {
  if (registry_.shutting_down()) {
    *reason = RejectReason::kShutdown;
    return ShuttingDownError();
  }
  if (options_.guard != nullptr && options_.guard->OverRate(context->peer())) {
    *reason = RejectReason::kRate;
    return options_.guard->RateError("streams");
  }
  if (options_.auth != nullptr) {
    absl::Status known = options_.auth->Authenticate(AuthorizationOf(context));
    if (!known.ok()) {
      *reason = RejectReason::kToken;
      return known;
    }
  }
  return absl::OkStatus();
}

template <typename Rpc>
ChunkServiceImpl::RawReactor* ChunkServiceImpl::OpenStream(
    grpc::CallbackServerContext* context) {
  if (context->IsCancelled()) {
    // Reset by the client before chunkd saw it (an HTTP/2 rapid reset, or
    // a client that gave up): nothing to serve, no slot to take.
    return new RefusedReactor(absl::CancelledError(
        "the client cancelled the stream before it started"));
  }
  RejectReason reason;
  absl::Status pre = PreAdmit(context, &reason);
  if (!pre.ok()) {
    CountRejected(reason);
    return new RefusedReactor(pre);
  }
  std::string authorization = AuthorizationOf(context);
  StreamOwner owner;
  if (options_.auth != nullptr) {
    owner.token = std::string(*options_.auth->Identify(authorization));
  }
  if (options_.limits.max_streams_per_ip != 0) {
    owner.ip = PeerIp(context->peer());
  }
  if (options_.limits.max_streams_per_connection != 0) {
    owner.connection = context->peer();
  }
  return new StreamReactor<Rpc>(this, std::move(authorization), owner);
}

ChunkServiceImpl::RawReactor* ChunkServiceImpl::Chunk(
    grpc::CallbackServerContext* context) {
  return OpenStream<ChunkRpc>(context);
}

ChunkServiceImpl::RawReactor* ChunkServiceImpl::Dedup(
    grpc::CallbackServerContext* context) {
  return OpenStream<DedupRpc>(context);
}

absl::Status ChunkServiceImpl::CheckNamespace(
    const grpc::CallbackServerContext* context, const std::string& ns) const {
  if (options_.auth != nullptr) {
    absl::Status allowed = options_.auth->Authorize(AuthorizationOf(context), ns);
    if (!allowed.ok()) return allowed;
  }
  return index::ValidateNamespace(ns);
}

grpc::ServerUnaryReactor* ChunkServiceImpl::FindMissing(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeUnary<v1::FindMissingRequest, v1::FindMissingResponse>(
      options_, context, request, response,
      [this, context](const v1::FindMissingRequest& r) {
        absl::Status valid = CheckNamespace(context, r.namespace_());
        if (!valid.ok()) return valid;
        return ValidateFingerprintList(r.fingerprints(),
                                       kMaxFindMissingFingerprints, 0);
      },
      // The index may be remote: looked up on the pool.
      [this](const v1::FindMissingRequest& r, v1::FindMissingResponse* out) {
        std::vector<std::string> fps(r.fingerprints().begin(),
                                     r.fingerprints().end());
        auto found = options_.index->Lookup(r.namespace_(), fps);
        if (!found.ok()) return found.status();
        for (size_t i = 0; i < fps.size(); ++i) {
          if (!(*found)[i]) out->add_missing_fingerprints(fps[i]);
        }
        return absl::OkStatus();
      },
      &pool_calls_);
}

grpc::ServerUnaryReactor* ChunkServiceImpl::Release(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeUnary<v1::ReleaseRequest, v1::ReleaseResponse>(
      options_, context, request, response,
      [this, context](const v1::ReleaseRequest& r) {
        absl::Status valid = CheckNamespace(context, r.namespace_());
        return valid.ok() ? ValidateRelease(r) : valid;
      },
      // The index may be remote: released on the pool.
      [this](const v1::ReleaseRequest& r, v1::ReleaseResponse* out) {
        std::vector<std::string> fps(r.fingerprints().begin(),
                                     r.fingerprints().end());
        const index::WriteToken token{r.request_id(), 0};
        auto left = options_.index->Release(
            r.namespace_(), fps, r.request_id().empty() ? nullptr : &token);
        if (!left.ok()) return left.status();
        out->mutable_ref_counts()->Reserve(static_cast<int>(left->size()));
        for (uint64_t count : *left) out->add_ref_counts(count);
        return absl::OkStatus();
      },
      &pool_calls_);
}

grpc::ServerUnaryReactor* ChunkServiceImpl::GetServerInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return ServeUnary<v1::GetServerInfoRequest, v1::GetServerInfoResponse>(
      options_, context, request, response,
      [this, context](const v1::GetServerInfoRequest&) {
        return options_.auth == nullptr
                   ? absl::OkStatus()
                   : options_.auth->Authenticate(AuthorizationOf(context));
      },
      [this](const v1::GetServerInfoRequest&, v1::GetServerInfoResponse* out) {
        FillServerInfo(out);
        return absl::OkStatus();
      },
      /*pool_calls=*/nullptr);
}

void ChunkServiceImpl::FillServerInfo(v1::GetServerInfoResponse* response) const {
  response->set_version(options_.version);
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    v1::AlgorithmInfo* info = response->add_algorithms();
    FillAlgorithmInfo(algorithm, info);
    // What the engine resolves for this algorithm's streams: the forced
    // kernel, or the automatic one on the pool's thread count.
    absl::StatusOr<chunking::EnginePlan> plan = chunking::PlanEngine(
        chunking::DefaultOptions(algorithm), options_.engine);
    if (plan.ok()) {
      info->set_backend(plan->kernel);
      info->set_backend_threads(static_cast<uint32_t>(plan->parallelism));
    }
  }
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_SHA256);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_XXH128);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_NONE);
  response->set_chunking_backend(options_.chunking_backend);
  response->set_index_backend(std::string(options_.index->backend()));
  response->set_max_message_bytes(options_.max_message_bytes);
  response->set_max_inflight_bytes(options_.max_inflight_bytes);
}

void ChunkServiceImpl::BeginShutdown() { registry_.BeginShutdown(); }

bool ChunkServiceImpl::WaitForCalls(absl::Time deadline) {
  return registry_.WaitForStreams(deadline) &&
         pool_calls_.WaitForNone(deadline);
}

void PoolCalls::Enter() {
  absl::MutexLock lock(&mu_);
  ++running_;
}

void PoolCalls::Exit() {
  absl::MutexLock lock(&mu_);
  --running_;
}

bool PoolCalls::WaitForNone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return running_ == 0;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

void ChunkServiceImpl::AbortAll(const absl::Status& status) {
  registry_.ForEach([&status](ActiveStream* stream) { stream->Abort(status); });
}

void ChunkServiceImpl::ExpireIdleStreams(absl::Time now) {
  const absl::Duration timeout = options_.stream_idle_timeout;
  if (timeout <= absl::ZeroDuration()) return;
  registry_.ForEach([&](ActiveStream* stream) {
    if (stream->IdleFor(now) < timeout) return;
    CountRejected(RejectReason::kIdle);
    stream->Abort(WithReason(absl::DeadlineExceededError(absl::StrCat(
        "the stream made no progress for ", absl::FormatDuration(timeout),
        " (--stream_idle_timeout): the client neither sent a request nor "
        "read a response; it was ended")), ErrorReason::kIdleTimeout));
  });
}

size_t ChunkServiceImpl::active_streams() const { return registry_.active(); }

uint64_t ChunkServiceImpl::streams_started() const {
  return registry_.admitted();
}

}  // namespace chunkd::service
