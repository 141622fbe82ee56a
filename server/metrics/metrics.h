// Metrics: every Prometheus family chunkd exports, each registered once by
// the constructor, served by prometheus-cpp on its own port at /metrics.
// Every family, its labels and what it counts: docs/operations.md,
// "Metrics". The grpc_server_* families are counted by the interceptor of
// service/grpc_metrics.h, the process_* ones read by process_metrics.h.
//
// Every series with a fixed label set exists from the start, at zero: all
// rpc x algorithm pairs, all algorithms, all stages here; the index and gRPC
// series when their decorator or interceptor factory is created.
//
// Thread safety: thread-safe. Every handle returned stays valid for the
// lifetime of the Metrics object.
#ifndef CHUNKD_METRICS_METRICS_H_
#define CHUNKD_METRICS_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "metrics/process_metrics.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace chunkd::metrics {

// The /metrics endpoint: threads serving it, and how long one connection
// may take to send its request (or read the answer) before its thread is
// freed. Together they keep scrapes answering while idle connections are
// open (docs/operations.md, "Running chunkd exposed").
inline constexpr int kMetricsThreads = 16;
inline constexpr int kMetricsRequestTimeoutMs = 1500;

// The label values of chunkd_stage_seconds_total{stage}.
inline constexpr const char* kStages[] = {"chunk", "fingerprint", "index"};

// Counters of one stream's traffic, looked up once at the stream's start.
struct StreamCounters {
  prometheus::Counter* ingest_bytes = nullptr;
  prometheus::Counter* chunks = nullptr;
  prometheus::Counter* duplicate_bytes = nullptr;   // Dedup only
  prometheus::Counter* duplicate_chunks = nullptr;  // Dedup only
  // Dedup with RapidCDC hints only (set by ForHints).
  prometheus::Counter* hints_accepted = nullptr;
  prometheus::Counter* hints_rejected = nullptr;
  prometheus::Counter* hint_skipped_bytes = nullptr;
  prometheus::Counter* hint_cache_hits = nullptr;
  prometheus::Counter* hint_cache_misses = nullptr;
};

// The label values of chunkd_hints_total{test} (pipeline::HintTestName).
inline constexpr const char* kHintTests[] = {"ff", "ff_mt", "ff_rwt",
                                             "ff_rwt_fpt"};

// chunkd_stage_seconds_total: time a stream's task spends in each stage of
// the pipeline (wall time of the worker running it), summed over streams.
struct StageCounters {
  prometheus::Counter* chunk = nullptr;
  prometheus::Counter* fingerprint = nullptr;
  prometheus::Counter* index = nullptr;
};

// The series of one index operation of one backend.
struct IndexOpMetrics {
  prometheus::Counter* ok = nullptr;
  prometheus::Counter* error = nullptr;
  prometheus::Histogram* duration = nullptr;
};

// What a Redis index tells of its waits for Redis to come back
// (index::FailoverWait::Counts).
struct IndexWaits {
  uint64_t waiting = 0;
  uint64_t recovered = 0;
  uint64_t expired = 0;
};

// What an embedded database's storage looks like (the rocksdb index;
// index::FingerprintIndex::StorageStats).
struct IndexStorage {
  uint64_t disk_bytes = 0;
  uint64_t pending_compaction_bytes = 0;
  uint64_t running_compactions = 0;
  uint64_t stall_micros = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_bytes = 0;
  uint64_t cache_capacity = 0;
};

// The streams' memory beyond their request bytes (--stream_memory_budget).
struct StreamMemoryUse {
  uint64_t reserved = 0;       // by running streams
  uint64_t waiting_bytes = 0;  // asked for by waiting streams
  uint64_t waiting_streams = 0;
  uint64_t limit = 0;
};

// The series of one gRPC method.
struct GrpcMethodMetrics {
  prometheus::Counter* started = nullptr;
  prometheus::Histogram* handling_seconds = nullptr;
  // grpc_server_handled_total by status code, indexed by grpc::StatusCode
  // (0..16).
  prometheus::Counter* handled[17] = {};
};

class Metrics {
 public:
  // `version` and `backend` (the chunking backend) label chunkd_build_info.
  Metrics(absl::string_view version, absl::string_view backend);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Starts the HTTP endpoint on `listen` ("host:port"), serving the
  // registry and the process_* families. FAILED_PRECONDITION naming the
  // address when it cannot bind.
  absl::Status Serve(const std::string& listen);

  // The counters of a stream of `rpc` ("Chunk", "Dedup" or "Estimate") with
  // `algorithm` (Estimate: its first set's).
  StreamCounters ForStream(absl::string_view rpc, absl::string_view algorithm);
  // Fills the hint counters of *counters for the acceptance test `test`.
  void ForHints(absl::string_view test, StreamCounters* counters);

  // The chunkd_stage_seconds_total counters.
  const StageCounters& stages() const { return stages_; }

  // Streams admitted and not yet done.
  prometheus::Gauge& active_streams() { return *active_streams_; }

  // chunkd_streams_rejected_total{reason}: the series of `reason`, created
  // at zero on first use (the service creates all of its reasons at start).
  prometheus::Counter& StreamsRejected(absl::string_view reason);
  // chunkd_connections_closed_total{reason}, likewise.
  prometheus::Counter& ConnectionsClosed(absl::string_view reason);
  prometheus::Counter& tls_handshake_failures() {
    return *tls_handshake_failures_;
  }

  // chunkd_index_entries is read from `entries` at every scrape; absent
  // while `entries` is unset or returns nothing. Same contract as
  // WatchQueueDepth.
  void WatchIndexEntries(std::function<std::optional<uint64_t>()> entries);
  // Exports chunkd_index_max_entries (the memory index's limit).
  void SetIndexMaxEntries(uint64_t max_entries);
  // chunkd_index_waiting_calls and chunkd_index_waits_total are read from
  // `waits` at every scrape; absent while `waits` is unset or returns
  // nothing (a memory index). Same contract as WatchQueueDepth.
  void WatchIndexWaits(std::function<std::optional<IndexWaits>()> waits);
  // The chunkd_index_disk_bytes ... families are read from `storage` at
  // every scrape; absent while it is unset or returns nothing. Same
  // contract as WatchQueueDepth.
  void WatchIndexStorage(std::function<std::optional<IndexStorage>()> storage);

  // Exports chunkd_chunking_backend_info{algorithm,threads,backend} 1: the
  // kernel (`backend`, e.g. "avx2") that `algorithm`'s streams run on
  // `threads` threads. Called once per algorithm at start-up.
  void SetChunkingBackend(absl::string_view algorithm, size_t threads,
                          absl::string_view backend);

  // chunkd_worker_queue_depth is read from `depth` at every scrape (0 until
  // this is called). `depth` must be thread-safe and outlive this object.
  void WatchQueueDepth(std::function<size_t()> depth);

  // chunkd_stream_memory_bytes{state} and chunkd_streams_waiting_for_memory
  // are read from `use` at every scrape (0 until this is called). Same
  // contract as WatchQueueDepth.
  void WatchStreamMemory(std::function<StreamMemoryUse()> use);

  // The series of index operation `op` of `backend`, created at zero.
  IndexOpMetrics ForIndexOp(absl::string_view backend, absl::string_view op);

  // The series of one gRPC method, created at zero for every code.
  // `type` is "unary", "client_stream", "server_stream" or "bidi_stream".
  GrpcMethodMetrics ForGrpcMethod(absl::string_view type,
                                  absl::string_view service,
                                  absl::string_view method);

  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

  // Sets the sampled gauges; called before every scrape.
  void Refresh() const;

 private:
  class Collector;

  // Requires mu_ held.
  void RefreshIndexWaitsLocked() const;
  void RefreshIndexStorageLocked() const;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* ingest_bytes_;
  prometheus::Family<prometheus::Counter>* chunks_;
  prometheus::Family<prometheus::Counter>* duplicate_bytes_;
  prometheus::Family<prometheus::Counter>* duplicate_chunks_;
  prometheus::Family<prometheus::Counter>* hints_;
  prometheus::Family<prometheus::Counter>* hint_skipped_bytes_;
  prometheus::Family<prometheus::Counter>* hint_cache_;
  prometheus::Family<prometheus::Counter>* index_requests_;
  prometheus::Family<prometheus::Histogram>* index_duration_;
  prometheus::Family<prometheus::Counter>* grpc_started_;
  prometheus::Family<prometheus::Counter>* grpc_handled_;
  prometheus::Family<prometheus::Histogram>* grpc_handling_;
  StageCounters stages_;
  prometheus::Gauge* active_streams_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* stream_memory_reserved_;
  prometheus::Gauge* stream_memory_waiting_;
  prometheus::Gauge* stream_memory_limit_;
  prometheus::Gauge* streams_waiting_for_memory_;
  prometheus::Family<prometheus::Counter>* streams_rejected_;
  prometheus::Family<prometheus::Counter>* connections_closed_;
  prometheus::Counter* tls_handshake_failures_;
  prometheus::Family<prometheus::Gauge>* index_entries_;
  prometheus::Family<prometheus::Gauge>* index_max_entries_;
  prometheus::Family<prometheus::Gauge>* chunking_backend_;
  prometheus::Family<prometheus::Gauge>* index_waiting_;
  prometheus::Family<prometheus::Counter>* index_waits_;
  struct StorageFamilies {
    prometheus::Family<prometheus::Gauge>* disk = nullptr;
    prometheus::Family<prometheus::Gauge>* pending = nullptr;
    prometheus::Family<prometheus::Gauge>* running = nullptr;
    prometheus::Family<prometheus::Gauge>* cache = nullptr;
    prometheus::Family<prometheus::Counter>* stall = nullptr;
    prometheus::Family<prometheus::Counter>* requests = nullptr;
  } storage_families_;

  mutable std::mutex mu_;
  std::function<size_t()> queue_depth_source_;  // guarded by mu_
  std::function<StreamMemoryUse()> stream_memory_source_;  // guarded by mu_
  std::function<std::optional<uint64_t>()> index_entries_source_;  // mu_
  mutable prometheus::Gauge* index_entries_gauge_ = nullptr;  // guarded by mu_
  std::function<std::optional<IndexWaits>()> index_waits_source_;  // mu_
  // Created at the first scrape with a source; what they counted so far.
  mutable prometheus::Gauge* index_waiting_gauge_ = nullptr;  // guarded by mu_
  mutable prometheus::Counter* index_recovered_ = nullptr;    // guarded by mu_
  mutable prometheus::Counter* index_expired_ = nullptr;      // guarded by mu_
  mutable IndexWaits index_waits_seen_;                       // guarded by mu_
  std::function<std::optional<IndexStorage>()> index_storage_source_;  // mu_
  // The storage samples, created at the first scrape with a source.
  struct StorageSamples {
    prometheus::Gauge* disk = nullptr;
    prometheus::Gauge* pending = nullptr;
    prometheus::Gauge* running = nullptr;
    prometheus::Gauge* cache_used = nullptr;
    prometheus::Gauge* cache_capacity = nullptr;
    prometheus::Counter* stall = nullptr;
    prometheus::Counter* hits = nullptr;
    prometheus::Counter* misses = nullptr;
    IndexStorage seen;
  };
  mutable std::optional<StorageSamples> storage_;  // guarded by mu_

  std::shared_ptr<Collector> collector_;
  std::shared_ptr<ProcessCollector> process_collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

// The grpc_code label of a status code: the names go-grpc-prometheus uses
// ("OK", "InvalidArgument", "Unavailable", ...), so that dashboards and
// alerts written for Go and Java gRPC servers work unchanged.
// "Unknown" for a value outside 0..16.
absl::string_view GrpcCodeLabel(int code);

}  // namespace chunkd::metrics

#endif  // CHUNKD_METRICS_METRICS_H_
