// What differs between the Chunk, Dedup and Estimate streams: their
// messages, the work their first request starts (stream_work.h), whether a
// request ends a file, the namespace checked against the caller's token, and
// what a client is told when a stream fails midway. The stream reactor
// (stream_reactor.h) is written once for all three and takes one of these as
// its parameter; everything not here is shared.
//
// Promises: Start() validates every parameter and returns INVALID_ARGUMENT
// naming the first bad one (docs/design.md, "Parameters, ranges and
// defaults"); Dedup and Estimate also check their namespace, Dedup its
// stream_id.
//
// Thread safety: stateless; safe from any thread.
#ifndef CHUNKD_SERVICE_STREAM_RPC_H_
#define CHUNKD_SERVICE_STREAM_RPC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "chunkd/v1/chunkd.pb.h"
#include "pipeline/stream_pipeline.h"
#include "service/stream_work.h"

namespace chunkd::service {

struct ServiceOptions;

struct ChunkRpc {
  using Request = v1::ChunkRequest;
  using Response = v1::ChunkResponse;
  static constexpr const char* kMethod = "Chunk";
  // What a client should know when the stream fails midway.
  static constexpr const char* kAfterFailure = "";
  // The namespace the stream writes to, checked against the caller's token.
  static const std::string* Namespace(const Request&) { return nullptr; }
  static bool EndsFile(const Request&) { return false; }

  static absl::StatusOr<pipeline::PipelineOptions> Options(
      const Request& request, const ServiceOptions& service);
  // The stream's work, from its first request (which has params).
  static absl::StatusOr<std::unique_ptr<StreamWork>> Start(
      const Request& request, const ServiceOptions& service);
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
  static bool EndsFile(const Request&) { return false; }

  static absl::StatusOr<pipeline::PipelineOptions> Options(
      const Request& request, const ServiceOptions& service);
  static absl::StatusOr<std::unique_ptr<StreamWork>> Start(
      const Request& request, const ServiceOptions& service);
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

struct EstimateRpc {
  using Request = v1::EstimateRequest;
  using Response = v1::EstimateResponse;
  static constexpr const char* kMethod = "Estimate";
  // Nothing is written: a failed estimate leaves nothing behind.
  static constexpr const char* kAfterFailure = "";
  // The namespace compared with (read), when given.
  static const std::string* Namespace(const Request& request) {
    const std::string& ns = request.params().namespace_();
    return ns.empty() ? nullptr : &ns;
  }
  static bool EndsFile(const Request& request) {
    return request.end_of_file();
  }

  static absl::StatusOr<std::unique_ptr<StreamWork>> Start(
      const Request& request, const ServiceOptions& service);
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_RPC_H_
