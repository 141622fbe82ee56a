#include "service/chunk_service.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "chunkd/chunker.h"
#include "pipeline/stream_pipeline.h"
#include "service/params.h"
#include "service/status_util.h"

namespace chunkd::service {
namespace {

// Records per response message: keeps a response far below gRPC's message
// limit (a record is at most ~50 bytes) while amortizing per-message costs.
constexpr size_t kMaxRecordsPerResponse = 1024;
// Unsent responses at which reading pauses (a client that does not read).
constexpr size_t kMaxQueuedResponses = 16;
// Input bytes one task processes before yielding the worker to other streams.
constexpr size_t kMaxBytesPerTask = size_t{4} << 20;
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

// One Chunk or Dedup stream.
//
// All state is guarded by mu_. gRPC operations (StartRead, StartWrite,
// Finish) are issued only from Drive(), one thread at a time and never under
// mu_, because gRPC may run a reaction on the thread that started the
// operation. The reactor deletes itself once gRPC has called OnDone and no
// task or Drive() holds a reference.
template <typename Rpc>
class StreamReactor final
    : public grpc::ServerBidiReactor<typename Rpc::Request,
                                     typename Rpc::Response>,
      public ActiveStream {
 public:
  using Request = typename Rpc::Request;
  using Response = typename Rpc::Response;

  StreamReactor(ChunkServiceImpl* service, std::string authorization)
      : service_(service), authorization_(std::move(authorization)) {
    const grpc::Status admitted = service_->Register(this);
    service_->options().metrics->active_streams().Increment();
    {
      std::lock_guard<std::mutex> lock(mu_);
      const TokenTable* auth = service_->options().auth;
      if (!admitted.ok()) {
        FailLocked(admitted);
      } else if (auth != nullptr) {
        absl::Status allowed = auth->Authenticate(authorization_);
        if (!allowed.ok()) FailLocked(ToGrpcStatus(allowed));
      }
    }
    Drive();
  }

  ~StreamReactor() override {
    // Normally zero by now: every read completed and every task ran.
    if (MemoryBudget* memory = service_->options().memory) {
      memory->Release(reserved_ + charged_);
    }
  }

  void OnReadDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      read_pending_ = false;
      if (!ok) {
        read_eof_ = true;
        if (pipeline_ == nullptr) {
          FailLocked(grpc::Status(
              grpc::StatusCode::INVALID_ARGUMENT,
              "the stream ended before a request with params arrived"));
        }
      } else if (!failed_) {
        AcceptLocked();
      }
      request_.Clear();
      // Whatever AcceptLocked did not charge goes back to the budget.
      SettleReservationLocked(0);
    }
    Drive();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      write_pending_ = false;
      outbox_.pop_front();
      if (!ok) {
        FailLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                                "the client stopped receiving responses"));
      }
    }
    Drive();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      FailLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                              "the client cancelled the stream"));
    }
    Drive();
  }

  void OnDone() override {
    service_->Unregister(this);
    const ServiceOptions& options = service_->options();
    options.metrics->active_streams().Decrement();
    bool destroy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      on_done_ = true;
      destroy = refs_ == 0;
    }
    if (destroy) delete this;
  }

  void Abort(const grpc::Status& status) override {
    // Called under the service's registry lock, so OnDone has not finished
    // and `this` is alive; the reference keeps it so until the task runs.
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

 private:
  enum class Op { kNone, kRead, kWrite, kFinish, kProcess };

  // Takes the request just read: parameters first, then data.
  void AcceptLocked() {
    const ServiceOptions& options = service_->options();
    if (pipeline_ == nullptr) {
      if (!request_.has_params()) {
        FailLocked(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            "the first request of a stream must carry params"));
        return;
      }
      const std::string* ns = Rpc::Namespace(request_);
      if (options.auth != nullptr && ns != nullptr) {
        absl::Status allowed = options.auth->Authorize(authorization_, *ns);
        if (!allowed.ok()) {
          FailLocked(ToGrpcStatus(allowed));
          return;
        }
      }
      auto pipeline_options = Rpc::Options(request_, options);
      if (!pipeline_options.ok()) {
        FailLocked(ToGrpcStatus(pipeline_options.status()));
        return;
      }
      auto pipeline = pipeline::StreamPipeline::Create(*pipeline_options);
      if (!pipeline.ok()) {
        FailLocked(ToGrpcStatus(pipeline.status()));
        return;
      }
      pipeline_ = *std::move(pipeline);
      counters_ = options.metrics->ForStream(
          Rpc::kMethod,
          chunking::AlgorithmName(pipeline_options->chunking.algorithm));
      if (pipeline_options->hints != pipeline::HintTest::kOff) {
        options.metrics->ForHints(
            pipeline::HintTestName(pipeline_options->hints), &counters_);
      }
    } else if (request_.has_params()) {
      FailLocked(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "params may be sent only in the first request of a stream"));
      return;
    }
    const size_t size = request_.data().size();
    if (size > options.max_message_bytes) {
      FailLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("data of ", size, " bytes exceeds max_message_bytes (",
                       options.max_message_bytes,
                       "); send the stream in smaller messages")));
      return;
    }
    if (size == 0) return;
    inbox_bytes_ += size;
    if (options.memory != nullptr) {
      // The reservation of this read becomes the charge for its bytes.
      charged_ += size;
      reserved_ -= size;
    }
    inbox_.push_back(std::move(*request_.mutable_data()));
    request_.Clear();
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
  void FailLocked(const grpc::Status& status) {
    if (failed_ || finish_called_) return;
    failed_ = true;
    final_status_ = status;
    while (outbox_.size() > (write_pending_ ? 1 : 0)) outbox_.pop_back();
    size_t dropped = 0;
    for (const std::string& piece : inbox_) dropped += piece.size();
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
      return Op::kFinish;
    }
    if (!write_pending_ && !outbox_.empty()) {
      write_pending_ = true;
      return Op::kWrite;
    }
    if (!write_pending_ && outbox_.empty() && processed_all_) {
      finish_called_ = true;
      final_status_ = grpc::Status::OK;
      return Op::kFinish;
    }
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
          this->StartRead(&request_);
          break;
        case Op::kWrite:
          // The front stays put until OnWriteDone pops it.
          this->StartWrite(&outbox_.front());
          break;
        case Op::kFinish:
          this->Finish(status);
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
    for (const std::string& piece : pieces) {
      if (!status.ok()) break;
      status = pipeline_->Process(piece, &records);
    }
    if (status.ok() && last) status = pipeline_->Finish(&records);
    // Dedup: one index round trip for the whole task, or for several while
    // more input is already waiting (the client is ahead: fewer, larger
    // batches; the pipeline commits by itself at kMaxPendingChunks).
    if (status.ok() && !last) {
      bool more_waiting;
      {
        std::lock_guard<std::mutex> lock(mu_);
        more_waiting = !inbox_.empty();
      }
      if (!more_waiting) status = pipeline_->Flush(&records);
    }

    std::deque<Response> responses;
    for (size_t i = 0; i < records.size(); i += kMaxRecordsPerResponse) {
      Response& response = responses.emplace_back();
      response.mutable_batch()->mutable_chunks()->Reserve(
          static_cast<int>(std::min(kMaxRecordsPerResponse, records.size() - i)));
      const size_t end = std::min(records.size(), i + kMaxRecordsPerResponse);
      for (size_t j = i; j < end; ++j) Rpc::AddRecord(records[j], &response);
    }
    const pipeline::StreamTotals& totals = pipeline_->totals();
    if (status.ok() && last) Rpc::SetSummary(totals, &responses.emplace_back());

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
      if (!status.ok()) {
        FailLocked(ToGrpcStatus(status));
      } else if (!failed_) {
        for (Response& r : responses) outbox_.push_back(std::move(r));
        if (last) processed_all_ = true;
      }
    }
    Drive();
    Unref();
  }

  ChunkServiceImpl* const service_;
  const std::string authorization_;  // the client's metadata, for Dedup's ns
  Request request_;  // written by gRPC while read_pending_
  std::unique_ptr<pipeline::StreamPipeline> pipeline_;  // used by the task
  metrics::StreamCounters counters_;

  std::mutex mu_;
  std::deque<std::string> inbox_;    // received, not yet processed
  size_t inbox_bytes_ = 0;           // bytes in inbox_ and in the task
  std::deque<Response> outbox_;      // front is being written if pending
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
  int refs_ = 0;  // Drive() calls, tasks and wake-ups in progress
  grpc::Status final_status_;
};

}  // namespace

ChunkServiceImpl::ChunkServiceImpl(ServiceOptions options)
    : options_(std::move(options)) {}

ChunkServiceImpl::~ChunkServiceImpl() = default;

grpc::ServerBidiReactor<v1::ChunkRequest, v1::ChunkResponse>*
ChunkServiceImpl::Chunk(grpc::CallbackServerContext* context) {
  return new StreamReactor<ChunkRpc>(this, AuthorizationOf(context));
}

grpc::ServerBidiReactor<v1::DedupRequest, v1::DedupResponse>*
ChunkServiceImpl::Dedup(grpc::CallbackServerContext* context) {
  return new StreamReactor<DedupRpc>(this, AuthorizationOf(context));
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
    grpc::CallbackServerContext* context, const v1::FindMissingRequest* request,
    v1::FindMissingResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status valid = CheckNamespace(context, request->namespace_());
  if (valid.ok()) {
    valid = ValidateFingerprintList(request->fingerprints(),
                                    kMaxFindMissingFingerprints, 0);
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  // The index may be remote: look up on the pool, not on gRPC's thread.
  options_.pool->Submit([this, reactor, request, response] {
    std::vector<std::string> fps(request->fingerprints().begin(),
                                 request->fingerprints().end());
    auto found = options_.index->Lookup(request->namespace_(), fps);
    if (!found.ok()) {
      reactor->Finish(ToGrpcStatus(found.status()));
      return;
    }
    for (size_t i = 0; i < fps.size(); ++i) {
      if (!(*found)[i]) response->add_missing_fingerprints(fps[i]);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ChunkServiceImpl::Release(
    grpc::CallbackServerContext* context, const v1::ReleaseRequest* request,
    v1::ReleaseResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status valid = CheckNamespace(context, request->namespace_());
  size_t digest_size = 0;
  if (valid.ok()) {
    auto kind = FingerprintFromProto(request->fingerprint());
    if (!kind.ok()) {
      valid = kind.status();
    } else if (*kind == fingerprint::Kind::kNone) {
      valid = absl::InvalidArgumentError(
          "fingerprint NONE cannot be used with Release: name the algorithm "
          "the fingerprints were computed with");
    } else {
      digest_size = fingerprint::DigestSize(*kind);
    }
  }
  if (valid.ok()) {
    valid = ValidateFingerprintList(request->fingerprints(),
                                    kMaxReleaseFingerprints, digest_size);
  }
  if (valid.ok() && !request->request_id().empty()) {
    absl::Status token = index::ValidateWriteToken({request->request_id(), 0});
    if (!token.ok()) {
      // The index calls it stream_id; the API calls it request_id.
      valid = absl::InvalidArgumentError(
          absl::StrCat("request_id",
                       absl::StripPrefix(token.message(), "stream_id")));
    }
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  // The index may be remote: release on the pool, not on gRPC's thread.
  options_.pool->Submit([this, reactor, request, response] {
    std::vector<std::string> fps(request->fingerprints().begin(),
                                 request->fingerprints().end());
    const index::WriteToken token{request->request_id(), 0};
    auto left = options_.index->Release(
        request->namespace_(), fps,
        request->request_id().empty() ? nullptr : &token);
    if (!left.ok()) {
      reactor->Finish(ToGrpcStatus(left.status()));
      return;
    }
    response->mutable_ref_counts()->Reserve(static_cast<int>(left->size()));
    for (uint64_t count : *left) response->add_ref_counts(count);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* ChunkServiceImpl::GetServerInfo(
    grpc::CallbackServerContext* context, const v1::GetServerInfoRequest*,
    v1::GetServerInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (options_.auth != nullptr) {
    absl::Status allowed =
        options_.auth->Authenticate(AuthorizationOf(context));
    if (!allowed.ok()) {
      reactor->Finish(ToGrpcStatus(allowed));
      return reactor;
    }
  }
  response->set_version(options_.version);
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    const chunking::AlgorithmLimits& limits = chunking::LimitsFor(algorithm);
    v1::AlgorithmInfo* info = response->add_algorithms();
    info->set_algorithm(AlgorithmToProto(algorithm));
    info->set_name(std::string(chunking::AlgorithmName(algorithm)));
    auto set = [](const chunking::ParamRange& from, v1::ParamRange* to) {
      to->set_min(from.min);
      to->set_max(from.max);
      to->set_default_value(from.default_value);
    };
    set(limits.min_size, info->mutable_min_size());
    set(limits.avg_size, info->mutable_avg_size());
    set(limits.max_size, info->mutable_max_size());
    info->set_avg_size_power_of_two(limits.avg_power_of_two);
    set(limits.normalization_level, info->mutable_normalization_level());
  }
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_SHA256);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_XXH128);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_NONE);
  response->set_chunking_backend(options_.chunking_backend);
  response->set_index_backend(std::string(options_.index->backend()));
  response->set_max_message_bytes(options_.max_message_bytes);
  response->set_max_inflight_bytes(options_.max_inflight_bytes);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void ChunkServiceImpl::BeginShutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
}

bool ChunkServiceImpl::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

bool ChunkServiceImpl::WaitForStreams(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return streams_cv_.wait_until(lock, absl::ToChronoTime(deadline),
                                [this] { return streams_.empty(); });
}

void ChunkServiceImpl::AbortAll(const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  for (ActiveStream* stream : streams_) stream->Abort(status);
}

size_t ChunkServiceImpl::active_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

uint64_t ChunkServiceImpl::streams_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_started_;
}

grpc::Status ChunkServiceImpl::Register(ActiveStream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.insert(stream);
  ++streams_started_;
  if (shutting_down_) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "chunkd is shutting down and accepts no new streams; "
                        "retry on another replica");
  }
  if (options_.max_streams != 0 && streams_.size() > options_.max_streams) {
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("chunkd is serving its limit of ", options_.max_streams,
                     " streams (--max_streams); retry later with backoff, "
                     "or on another replica"));
  }
  return grpc::Status::OK;
}

void ChunkServiceImpl::Unregister(ActiveStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.erase(stream);
  }
  streams_cv_.notify_all();
}

}  // namespace chunkd::service
