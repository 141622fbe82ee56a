#include "service/stream_rpc.h"

#include "absl/strings/str_cat.h"
#include "index/fingerprint_index.h"
#include "service/chunk_service.h"
#include "service/estimate_work.h"
#include "service/params.h"
#include "service/stream_task.h"

namespace chunkd::service {
namespace {

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

}  // namespace

absl::StatusOr<pipeline::PipelineOptions> ChunkRpc::Options(
    const Request& request, const ServiceOptions& service) {
  return StreamOptions(request.params().chunking(),
                       request.params().fingerprint(), service);
}

absl::StatusOr<pipeline::PipelineOptions> DedupRpc::Options(
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

absl::StatusOr<std::unique_ptr<StreamWork>> ChunkRpc::Start(
    const Request& request, const ServiceOptions& service) {
  auto options = Options(request, service);
  if (!options.ok()) return options.status();
  return MakePipelineWork<ChunkRpc>(*options, service.metrics);
}

absl::StatusOr<std::unique_ptr<StreamWork>> DedupRpc::Start(
    const Request& request, const ServiceOptions& service) {
  auto options = Options(request, service);
  if (!options.ok()) return options.status();
  return MakePipelineWork<DedupRpc>(*options, service.metrics);
}

absl::StatusOr<std::unique_ptr<StreamWork>> EstimateRpc::Start(
    const Request& request, const ServiceOptions& service) {
  return MakeEstimateWork(request.params(), service);
}

}  // namespace chunkd::service
