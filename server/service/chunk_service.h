// ChunkServiceImpl: the gRPC face of chunkd (docs/design.md, "The data path
// of one stream"), on the callback API with raw request and response bytes.
// It admits streams and holds what they share; the parts do the rest:
//   wire_format.h     parses requests, serializes responses;
//   stream_rpc.h      what differs between Chunk, Dedup and Estimate;
//   stream_reactor.h  one stream's flow control (one task at a time per
//                     stream, on the shared WorkerPool; backpressure);
//   stream_work.h     what one task of a stream does (stream_task.h for
//                     Chunk and Dedup, estimate_work.h for Estimate);
//   unary_calls.h     FindMissing, Release, GetServerInfo.
//
// Promises: only admitted streams hold a slot (StreamRegistry); refused ones
// are finished at once and counted in chunkd_streams_rejected_total. The
// request bytes of all streams stay within ServiceOptions::memory, and what
// they hold beyond them within ServiceOptions::stream_memory (docs/design.md,
// "Memory bounds"). A stream that waits on its client for
// stream_idle_timeout ends with DEADLINE_EXCEEDED.
//
// Thread safety: thread-safe; gRPC calls the handlers from its own threads.
#ifndef CHUNKD_SERVICE_CHUNK_SERVICE_H_
#define CHUNKD_SERVICE_CHUNK_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "absl/time/time.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/worker_pool.h"
#include "service/auth.h"
#include "service/connection_guard.h"
#include "service/memory_budget.h"
#include "service/memory_plan.h"
#include "service/periodic.h"
#include "service/request_bytes.h"
#include "service/stream_registry.h"
#include "service/unary_calls.h"

namespace chunkd::service {

struct ServiceOptions {
  // Required; must outlive the service.
  index::FingerprintIndex* index = nullptr;
  pipeline::WorkerPool* pool = nullptr;
  metrics::Metrics* metrics = nullptr;
  // Largest `data` field of one request. Default 4 MiB.
  size_t max_message_bytes = size_t{4} << 20;
  // Unprocessed bytes of one stream at which reading pauses. Default 16 MiB.
  size_t max_inflight_bytes = size_t{16} << 20;
  // Streams (Chunk, Dedup and Estimate together) served at once, per bearer token
  // and per client IP; one more gets RESOURCE_EXHAUSTED. 0: no limit.
  RegistryLimits limits;
  // A stream waiting on its client (no request arriving, no response
  // taken) this long ends with DEADLINE_EXCEEDED. Zero: never.
  absl::Duration stream_idle_timeout = absl::ZeroDuration();
  // The per-connection stream rate (the interceptor factory registered with
  // the server); null: no rate limit.
  const ConnectionGuard* guard = nullptr;
  // Request bytes held by all streams together (see MemoryBudget). Null: no
  // global bound beyond the per-stream one.
  MemoryBudget* memory = nullptr;
  // What all streams together hold beyond their request bytes, each
  // reserving StreamMemoryBytes of its parameters and stream_settings (whose
  // message and inflight sizes must be the two above, and window the
  // engine's). Null: not reserved.
  FairBudget* stream_memory = nullptr;
  StreamSettings stream_settings;
  // The most distinct chunks one Estimate stream keeps over its sets
  // (estimate::EstimatorOptions::max_entries; chunkd passes
  // --estimate_max_entries). Default 0: no limit.
  uint64_t estimate_max_entries = 0;
  // Dedup with hints and sha256: the server's hint cache; null: none.
  pipeline::HintCache* hint_cache = nullptr;
  // See PipelineOptions::hint_cache_all_chunks (chunkd: for a Redis index).
  bool hint_cache_all_chunks = false;
  // Bearer tokens; null: no authorization (every caller is trusted).
  const TokenTable* auth = nullptr;
  // Reported by GetServerInfo.
  std::string version = "0.0.0";
  // "auto" (each algorithm's kernel chosen by calibration) or the kernel
  // forced for all (engine.kernel's name).
  std::string chunking_backend = "auto";
  // How every stream's chunks are cut: the kernel named chunking_backend
  // (null for auto) and the pool as executor; GetServerInfo reports each
  // algorithm's kernel as the engine resolves it. Default: the automatic
  // kernel, one thread per stream.
  chunking::EngineOptions engine;
};

// Every method of ChunkService on the callback API with raw request and
// response bytes.
using RawChunkService = v1::ChunkService::WithRawCallbackMethod_Chunk<
    v1::ChunkService::WithRawCallbackMethod_Dedup<
        v1::ChunkService::WithRawCallbackMethod_FindMissing<
            v1::ChunkService::WithRawCallbackMethod_Release<
                v1::ChunkService::WithRawCallbackMethod_GetServerInfo<
                    v1::ChunkService::WithRawCallbackMethod_Estimate<
                        v1::ChunkService::Service>>>>>>;

class ChunkServiceImpl final : public RawChunkService {
 public:
  explicit ChunkServiceImpl(ServiceOptions options);
  ~ChunkServiceImpl() override;
  ChunkServiceImpl(const ChunkServiceImpl&) = delete;
  ChunkServiceImpl& operator=(const ChunkServiceImpl&) = delete;

  using RawReactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

  RawReactor* Chunk(grpc::CallbackServerContext* context) override;
  RawReactor* Dedup(grpc::CallbackServerContext* context) override;
  RawReactor* Estimate(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* FindMissing(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

  // Drain (docs/design.md, "Threading model"): from now on new streams
  // fail with UNAVAILABLE.
  void BeginShutdown();

  // Waits until no stream runs and no FindMissing or Release call is under
  // way, or `deadline` passes; true if none is.
  bool WaitForCalls(absl::Time deadline);

  // Ends every running stream with `status`.
  void AbortAll(const absl::Status& status);

  // Ends every stream that waited on its client for stream_idle_timeout as
  // of `now` (the service calls it periodically; public for tests).
  void ExpireIdleStreams(absl::Time now);

  // Admitted streams running now (never above limits.max_streams).
  size_t active_streams() const;
  // Streams admitted since the start.
  uint64_t streams_started() const;

  // Used by the reactors.
  const ServiceOptions& options() const { return options_; }
  StreamRegistry& registry() { return registry_; }
  // Buffers for the streams' request data.
  BufferPool& buffers() { return buffers_; }
  // Frees the request buffers kept for reuse; for when no stream runs, so
  // that the allocator can give their memory back (allocator.h).
  void ReleaseIdleBuffers() { buffers_.Clear(); }
  // Counts a stream refused or ended for `reason`.
  void CountRejected(RejectReason reason);

 private:
  // A new Chunk, Dedup or Estimate stream: admitted, or refused without holding a
  // slot.
  template <typename Rpc>
  RawReactor* OpenStream(grpc::CallbackServerContext* context);
  // Checks that need no slot: draining, the connection's stream rate, the
  // bearer token. OK, or the status (and reason) to refuse with.
  absl::Status PreAdmit(const grpc::CallbackServerContext* context,
                        RejectReason* reason);
  // The caller's token may use `ns` (when auth is on), and `ns` is valid.
  absl::Status CheckNamespace(const grpc::CallbackServerContext* context,
                              const std::string& ns) const;

  ServiceOptions options_;
  StreamRegistry registry_;
  // The FindMissing and Release calls under way on the pool (the other
  // unary calls are answered before their handler returns).
  PoolCalls pool_calls_;
  BufferPool buffers_;
  prometheus::Counter* rejected_[std::size(kAllRejectReasons)] = {};
  PeriodicThread idle_reaper_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_CHUNK_SERVICE_H_
