#include "service/chunk_service.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "platform/error_reason.h"
#include "service/stream_reactor.h"
#include "service/stream_rpc.h"
#include "service/wire_format.h"

namespace chunkd::service {
namespace {

// Request data buffers the service keeps for reuse, at least.
constexpr size_t kMaxKeptBufferBytes = size_t{16} << 20;

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

ChunkServiceImpl::RawReactor* ChunkServiceImpl::Estimate(
    grpc::CallbackServerContext* context) {
  return OpenStream<EstimateRpc>(context);
}

void ChunkServiceImpl::BeginShutdown() { registry_.BeginShutdown(); }

bool ChunkServiceImpl::WaitForCalls(absl::Time deadline) {
  return registry_.WaitForStreams(deadline) &&
         pool_calls_.WaitForNone(deadline);
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
