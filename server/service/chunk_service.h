// ChunkServiceImpl: the gRPC face of chunkd (DESIGN.md §1, §7), on the
// callback API.
//
// Each Chunk or Dedup stream is one reactor. Reactor callbacks never block:
// they move the request's bytes into the stream's inbox and hand the work to
// the shared WorkerPool, at most one task per stream at a time, so a stream's
// records stay in order and no stream owns a thread. Reading stops while the
// stream's unprocessed bytes reach max_inflight_bytes or its unsent responses
// pile up, so gRPC flow control slows a client that sends faster than chunkd
// cuts, or reads slower than chunkd answers.
//
// Memory: the request bytes of all streams together stay within
// ServiceOptions::memory (reservations of max_message_bytes per pending read
// included). Per stream: at most max_inflight_bytes + max_message_bytes of
// unprocessed input, plus the chunker's buffer and bitmaps (chunkd/chunker.h
// StreamChunker: at most 2 * (window + max_size + 256 bytes) + one message,
// plus about window + max_size / 2 of bitmaps; the window is 2 to 8 MiB
// with the pool as executor), plus kMaxQueuedResponses response batches.
//
// Thread safety: thread-safe; gRPC calls the handlers from its own threads.
#ifndef CHUNKD_SERVICE_CHUNK_SERVICE_H_
#define CHUNKD_SERVICE_CHUNK_SERVICE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "chunkd/chunker.h"
#include "chunkd/v1/chunkd.grpc.pb.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/worker_pool.h"
#include "service/auth.h"
#include "service/memory_budget.h"

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
  // Streams (Chunk and Dedup together) served at once; one more gets
  // RESOURCE_EXHAUSTED. 0: no limit.
  size_t max_streams = 0;
  // Request bytes held by all streams together (see MemoryBudget). Null: no
  // global bound beyond the per-stream one.
  MemoryBudget* memory = nullptr;
  // Dedup with hints and sha256: the server's hint cache; null: none.
  pipeline::HintCache* hint_cache = nullptr;
  // See PipelineOptions::hint_cache_all_chunks (chunkd: for a Redis index).
  bool hint_cache_all_chunks = false;
  // Bearer tokens; null: no authorization (every caller is trusted).
  const TokenTable* auth = nullptr;
  // Reported by GetServerInfo.
  std::string version = "0.0.0";
  std::string chunking_backend = "scalar";
  // How every stream's chunks are cut: the kernel named chunking_backend and
  // the pool as executor. Default: the default kernel, one thread per stream.
  chunking::EngineOptions engine;
};

// A running stream that the service can end early (at shutdown).
class ActiveStream {
 public:
  virtual ~ActiveStream() = default;
  // Ends the stream with `status` as soon as no write is in flight.
  virtual void Abort(const grpc::Status& status) = 0;
};

class ChunkServiceImpl final : public v1::ChunkService::CallbackService {
 public:
  explicit ChunkServiceImpl(ServiceOptions options);
  ~ChunkServiceImpl() override;
  ChunkServiceImpl(const ChunkServiceImpl&) = delete;
  ChunkServiceImpl& operator=(const ChunkServiceImpl&) = delete;

  grpc::ServerBidiReactor<v1::ChunkRequest, v1::ChunkResponse>* Chunk(
      grpc::CallbackServerContext* context) override;
  grpc::ServerBidiReactor<v1::DedupRequest, v1::DedupResponse>* Dedup(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* FindMissing(
      grpc::CallbackServerContext* context,
      const v1::FindMissingRequest* request,
      v1::FindMissingResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(
      grpc::CallbackServerContext* context,
      const v1::GetServerInfoRequest* request,
      v1::GetServerInfoResponse* response) override;

  // Drain: from now on new streams fail with UNAVAILABLE.
  void BeginShutdown();

  // Waits until no stream is running or `deadline` passes; true if none runs.
  bool WaitForStreams(absl::Time deadline);

  // Ends every running stream with `status`.
  void AbortAll(const grpc::Status& status);

  size_t active_streams() const;
  // Streams registered since the start (refused ones included).
  uint64_t streams_started() const;

  // Used by the reactors.
  const ServiceOptions& options() const { return options_; }
  bool shutting_down() const;
  // Adds a stream; returns a status the stream must end with when the
  // service is draining or at max_streams (the stream is registered anyway).
  grpc::Status Register(ActiveStream* stream);
  void Unregister(ActiveStream* stream);

 private:
  // The caller's token may use `ns` (when auth is on), and `ns` is valid.
  absl::Status CheckNamespace(const grpc::CallbackServerContext* context,
                              const std::string& ns) const;

  ServiceOptions options_;
  mutable std::mutex mu_;
  std::condition_variable streams_cv_;
  absl::flat_hash_set<ActiveStream*> streams_;  // guarded by mu_
  uint64_t streams_started_ = 0;                // guarded by mu_
  bool shutting_down_ = false;                  // guarded by mu_
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_CHUNK_SERVICE_H_
