#include "service/unary_calls.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "chunkd/chunker.h"
#include "service/chunk_service.h"
#include "service/params.h"
#include "service/status_util.h"
#include "service/wire_format.h"

namespace chunkd::service {
namespace {

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
        FillServerInfo(options_, out);
        return absl::OkStatus();
      },
      /*pool_calls=*/nullptr);
}

void FillServerInfo(const ServiceOptions& options,
                    v1::GetServerInfoResponse* response) {
  response->set_version(options.version);
  for (chunking::Algorithm algorithm : chunking::AllAlgorithms()) {
    v1::AlgorithmInfo* info = response->add_algorithms();
    FillAlgorithmInfo(algorithm, info);
    // What the engine resolves for this algorithm's streams: the forced
    // kernel, or the automatic one on the pool's thread count.
    absl::StatusOr<chunking::EnginePlan> plan = chunking::PlanEngine(
        chunking::DefaultOptions(algorithm), options.engine);
    if (plan.ok()) {
      info->set_backend(plan->kernel);
      info->set_backend_threads(static_cast<uint32_t>(plan->parallelism));
    }
  }
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_SHA256);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_XXH128);
  response->add_fingerprints(v1::FINGERPRINT_ALGORITHM_NONE);
  response->set_chunking_backend(options.chunking_backend);
  response->set_index_backend(std::string(options.index->backend()));
  response->set_max_message_bytes(options.max_message_bytes);
  response->set_max_inflight_bytes(options.max_inflight_bytes);
}

}  // namespace chunkd::service
