#include "metrics/metrics.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chunkd/tables.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace chunkd::metrics {
namespace {

// gRPC handling time: from microsecond unary calls to streams of many
// gigabytes.
const prometheus::Histogram::BucketBoundaries& GrpcBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      0.5,    1,     2.5,    5,     10,   30,    60,   300};
  return *buckets;
}

// Index calls: microseconds in memory, a round trip or more for Redis, up to
// the command timeout when Redis does not answer.
const prometheus::Histogram::BucketBoundaries& IndexBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
      0.01,    0.025,    0.05,    0.1,    0.25,    0.5,    1,     2.5};
  return *buckets;
}

// The algorithm label values are the table's names (chunkd/tables.h; this
// library does not depend on chunking).
constexpr const char* kRpcs[] = {"Chunk", "Dedup", "Estimate"};

// grpc-go's codes.Code.String(), which go-grpc-prometheus puts in grpc_code.
constexpr const char* kGrpcCodes[17] = {"OK",
                                        "Canceled",
                                        "Unknown",
                                        "InvalidArgument",
                                        "DeadlineExceeded",
                                        "NotFound",
                                        "AlreadyExists",
                                        "PermissionDenied",
                                        "ResourceExhausted",
                                        "FailedPrecondition",
                                        "Aborted",
                                        "OutOfRange",
                                        "Unimplemented",
                                        "Internal",
                                        "Unavailable",
                                        "DataLoss",
                                        "Unauthenticated"};

// A metric family: its name and help text.
struct FamilyDef {
  const char* name;
  const char* help;
};

constexpr FamilyDef kIngestBytes = {
    "chunkd_ingest_bytes_total",
    "Bytes received by Chunk, Dedup and Estimate streams."};
constexpr FamilyDef kChunks = {
    "chunkd_chunks_total",
    "Chunks produced by Chunk, Dedup and Estimate streams (Estimate: every "
    "set's, counted when the stream ends)."};
constexpr FamilyDef kDuplicateBytes = {
    "chunkd_duplicate_bytes_total",
    "Bytes of Dedup chunks already in the index."};
constexpr FamilyDef kDuplicateChunks = {"chunkd_duplicate_chunks_total",
                                        "Dedup chunks already in the index."};
constexpr FamilyDef kHints = {
    "chunkd_hints_total",
    "RapidCDC next-chunk sizes tested in Dedup, by acceptance "
    "test and result (accepted or rejected)."};
constexpr FamilyDef kHintSkippedBytes = {
    "chunkd_hint_skipped_bytes_total",
    "Bytes of chunks taken from accepted RapidCDC "
    "hints: not scanned for boundaries."};
constexpr FamilyDef kHintCache = {
    "chunkd_hint_cache_total",
    "Accepted RapidCDC hints whose SHA-256 came from "
    "the hint cache (hit) or had to be computed (miss)."};
constexpr FamilyDef kStageSeconds = {
    "chunkd_stage_seconds_total",
    "Worker time spent per pipeline stage (chunk, "
    "fingerprint, index), summed over streams."};
constexpr FamilyDef kActiveStreams = {
    "chunkd_active_streams", "Chunk, Dedup and Estimate streams in progress."};
constexpr FamilyDef kStreamsRejected = {
    "chunkd_streams_rejected_total",
    "Chunk, Dedup and Estimate streams refused at admission or ended by a "
    "limit, by reason (limit, per_token_limit, per_ip_limit, "
    "per_connection_limit, rate, idle, token, auth, shutdown)."};
constexpr FamilyDef kConnectionsClosed = {
    "chunkd_connections_closed_total",
    "Client connections chunkd shut down, by reason "
    "(stream_rate: streams opened far past "
    "--max_stream_rate_per_connection)."};
constexpr FamilyDef kTlsHandshakeFailures = {
    "chunkd_tls_handshake_failures_total",
    "TLS handshakes that failed (the log has a count per "
    "interval)."};
constexpr FamilyDef kIndexEntries = {
    "chunkd_index_entries",
    "Entries in the embedded memory index (absent "
    "with a Redis index)."};
constexpr FamilyDef kIndexMaxEntries = {
    "chunkd_index_max_entries",
    "Entries the embedded memory index may hold "
    "(--index_max_entries; absent with a Redis index)."};
constexpr FamilyDef kQueueDepth = {
    "chunkd_worker_queue_depth",
    "Tasks waiting for a thread of the shared worker "
    "pool."};
constexpr FamilyDef kStreamMemory = {
    "chunkd_stream_memory_bytes",
    "Memory the streams hold beyond their request bytes "
    "(--stream_memory_budget), by state: reserved by running streams, "
    "waiting (asked for by streams waiting their turn), limit."};
constexpr FamilyDef kStreamsWaitingForMemory = {
    "chunkd_streams_waiting_for_memory",
    "Streams waiting for their memory (--stream_memory_budget): admitted, "
    "reading nothing until the streams before them end."};
constexpr FamilyDef kIndexWaiting = {
    "chunkd_index_waiting_calls",
    "Index calls waiting for Redis to come back (a failover, a restart; "
    "--redis_failover_wait); absent with the memory index."};
constexpr FamilyDef kIndexWaits = {
    "chunkd_index_waits_total",
    "Waits of index calls for Redis to come back that ended, by result: "
    "recovered (the call went on) or expired (it failed); absent with the "
    "memory index."};
constexpr FamilyDef kIndexDiskBytes = {
    "chunkd_index_disk_bytes",
    "Bytes the rocksdb index takes on disk: its table files and write-ahead "
    "logs (absent with other indexes)."};
constexpr FamilyDef kIndexPendingCompaction = {
    "chunkd_index_pending_compaction_bytes",
    "RocksDB's estimate of the bytes compaction has to rewrite to bring the "
    "rocksdb index's levels back in shape; writes slow down when it grows."};
constexpr FamilyDef kIndexRunningCompactions = {
    "chunkd_index_running_compactions",
    "Compactions of the rocksdb index running now."};
constexpr FamilyDef kIndexStallSeconds = {
    "chunkd_index_write_stall_seconds_total",
    "Time the rocksdb index's writes were delayed or stopped by RocksDB "
    "(compaction or flushes falling behind)."};
constexpr FamilyDef kIndexCacheRequests = {
    "chunkd_index_block_cache_requests_total",
    "Block cache lookups of the rocksdb index, by result: hit or miss (a "
    "read from disk)."};
constexpr FamilyDef kIndexCacheBytes = {
    "chunkd_index_block_cache_bytes",
    "The rocksdb index's block cache, memtables included, by state: used, "
    "capacity (--index_cache_mib)."};
constexpr FamilyDef kIndexRequests = {"chunkd_index_requests_total",
                                      "Fingerprint index calls, by backend, "
                                      "operation and result (ok or error)."};
constexpr FamilyDef kIndexDuration = {"chunkd_index_request_duration_seconds",
                                      "Duration of fingerprint index calls, by "
                                      "backend and operation."};
constexpr FamilyDef kGrpcStarted = {"grpc_server_started_total",
                                    "RPCs started on the server."};
constexpr FamilyDef kGrpcHandled = {
    "grpc_server_handled_total",
    "RPCs completed on the server, regardless of "
    "success or failure."};
constexpr FamilyDef kGrpcHandling = {"grpc_server_handling_seconds",
                                     "Response latency (seconds) of gRPC calls "
                                     "handled by the server."};
constexpr FamilyDef kBuildInfo = {
    "chunkd_build_info",
    "Constant 1, labelled with the version and chunking backend (\"auto\": "
    "per algorithm, see chunkd_chunking_backend_info)."};
constexpr FamilyDef kChunkingBackend = {
    "chunkd_chunking_backend_info",
    "Constant 1, labelled with an algorithm, the thread count of its "
    "streams and the stage-1 kernel they run."};

prometheus::Family<prometheus::Counter>& Counters(
    prometheus::Registry& registry, const FamilyDef& def) {
  return prometheus::BuildCounter().Name(def.name).Help(def.help).Register(
      registry);
}

prometheus::Family<prometheus::Gauge>& Gauges(prometheus::Registry& registry,
                                              const FamilyDef& def) {
  return prometheus::BuildGauge().Name(def.name).Help(def.help).Register(
      registry);
}

prometheus::Family<prometheus::Histogram>& Histograms(
    prometheus::Registry& registry, const FamilyDef& def) {
  return prometheus::BuildHistogram().Name(def.name).Help(def.help).Register(
      registry);
}

}  // namespace

absl::string_view GrpcCodeLabel(int code) {
  if (code < 0 || code >= 17) return "Unknown";
  return kGrpcCodes[code];
}

// What the exposer scrapes: the registry, after the sampled gauges are set.
class Metrics::Collector final : public prometheus::Collectable {
 public:
  explicit Collector(const Metrics* metrics) : metrics_(metrics) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    metrics_->Refresh();
    return metrics_->registry_->Collect();
  }

 private:
  const Metrics* const metrics_;
};

Metrics::Metrics(absl::string_view version, absl::string_view backend)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  ingest_bytes_ = &Counters(r, kIngestBytes);
  chunks_ = &Counters(r, kChunks);
  duplicate_bytes_ = &Counters(r, kDuplicateBytes);
  duplicate_chunks_ = &Counters(r, kDuplicateChunks);
  hints_ = &Counters(r, kHints);
  hint_skipped_bytes_ = &Counters(r, kHintSkippedBytes);
  hint_cache_ = &Counters(r, kHintCache);
  hint_cache_->Add({{"result", "hit"}});
  hint_cache_->Add({{"result", "miss"}});
  for (const char* test : kHintTests) {
    hints_->Add({{"test", test}, {"result", "accepted"}});
    hints_->Add({{"test", test}, {"result", "rejected"}});
    hint_skipped_bytes_->Add({{"test", test}});
  }
  auto& stage = Counters(r, kStageSeconds);
  stages_.chunk = &stage.Add({{"stage", "chunk"}});
  stages_.fingerprint = &stage.Add({{"stage", "fingerprint"}});
  stages_.index = &stage.Add({{"stage", "index"}});
  active_streams_ = &Gauges(r, kActiveStreams).Add({});
  streams_rejected_ = &Counters(r, kStreamsRejected);
  connections_closed_ = &Counters(r, kConnectionsClosed);
  tls_handshake_failures_ = &Counters(r, kTlsHandshakeFailures).Add({});
  index_entries_ = &Gauges(r, kIndexEntries);
  index_max_entries_ = &Gauges(r, kIndexMaxEntries);
  chunking_backend_ = &Gauges(r, kChunkingBackend);
  index_waiting_ = &Gauges(r, kIndexWaiting);
  index_waits_ = &Counters(r, kIndexWaits);
  storage_families_.disk = &Gauges(r, kIndexDiskBytes);
  storage_families_.pending = &Gauges(r, kIndexPendingCompaction);
  storage_families_.running = &Gauges(r, kIndexRunningCompactions);
  storage_families_.cache = &Gauges(r, kIndexCacheBytes);
  storage_families_.stall = &Counters(r, kIndexStallSeconds);
  storage_families_.requests = &Counters(r, kIndexCacheRequests);
  queue_depth_ = &Gauges(r, kQueueDepth).Add({});
  auto& stream_memory = Gauges(r, kStreamMemory);
  stream_memory_reserved_ = &stream_memory.Add({{"state", "reserved"}});
  stream_memory_waiting_ = &stream_memory.Add({{"state", "waiting"}});
  stream_memory_limit_ = &stream_memory.Add({{"state", "limit"}});
  streams_waiting_for_memory_ = &Gauges(r, kStreamsWaitingForMemory).Add({});
  index_requests_ = &Counters(r, kIndexRequests);
  index_duration_ = &Histograms(r, kIndexDuration);
  grpc_started_ = &Counters(r, kGrpcStarted);
  grpc_handled_ = &Counters(r, kGrpcHandled);
  grpc_handling_ = &Histograms(r, kGrpcHandling);
  Gauges(r, kBuildInfo)
      .Add({{"version", std::string(version)},
            {"backend", std::string(backend)}})
      .Set(1);
  // Fixed label sets exist from the start, at zero.
  for (const char* rpc : kRpcs) {
    for (const chunking::tables::AlgorithmRow& row :
         chunking::tables::kAlgorithms) {
      ForStream(rpc, row.name);
    }
  }
  collector_ = std::make_shared<Collector>(this);
  process_collector_ = std::make_shared<ProcessCollector>();
}

Metrics::~Metrics() = default;

absl::Status Metrics::Serve(const std::string& listen) {
  try {
    // Enough threads that idle connections (civetweb gives each its own
    // thread until the request arrives) leave room for scrapes, and a
    // request timeout that frees those threads again.
    exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", listen, "num_threads",
        std::to_string(kMetricsThreads), "request_timeout_ms",
        std::to_string(kMetricsRequestTimeoutMs)});
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot serve metrics on --metrics_listen ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(collector_);
  exposer_->RegisterCollectable(process_collector_);
  return absl::OkStatus();
}

void Metrics::ForHints(absl::string_view test, StreamCounters* counters) {
  const std::string name(test);
  counters->hints_accepted =
      &hints_->Add({{"test", name}, {"result", "accepted"}});
  counters->hints_rejected =
      &hints_->Add({{"test", name}, {"result", "rejected"}});
  counters->hint_skipped_bytes = &hint_skipped_bytes_->Add({{"test", name}});
  counters->hint_cache_hits = &hint_cache_->Add({{"result", "hit"}});
  counters->hint_cache_misses = &hint_cache_->Add({{"result", "miss"}});
}

StreamCounters Metrics::ForStream(absl::string_view rpc,
                                  absl::string_view algorithm) {
  const prometheus::Labels labels{{"rpc", std::string(rpc)},
                                  {"algorithm", std::string(algorithm)}};
  StreamCounters c;
  c.ingest_bytes = &ingest_bytes_->Add(labels);
  c.chunks = &chunks_->Add(labels);
  if (rpc == "Dedup") {
    const prometheus::Labels alg{{"algorithm", std::string(algorithm)}};
    c.duplicate_bytes = &duplicate_bytes_->Add(alg);
    c.duplicate_chunks = &duplicate_chunks_->Add(alg);
  }
  return c;
}

prometheus::Counter& Metrics::StreamsRejected(absl::string_view reason) {
  return streams_rejected_->Add({{"reason", std::string(reason)}});
}

prometheus::Counter& Metrics::ConnectionsClosed(absl::string_view reason) {
  return connections_closed_->Add({{"reason", std::string(reason)}});
}

void Metrics::WatchIndexEntries(
    std::function<std::optional<uint64_t>()> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  index_entries_source_ = std::move(entries);
}

void Metrics::WatchIndexWaits(
    std::function<std::optional<IndexWaits>()> waits) {
  std::lock_guard<std::mutex> lock(mu_);
  index_waits_source_ = std::move(waits);
}

void Metrics::WatchIndexStorage(
    std::function<std::optional<IndexStorage>()> storage) {
  std::lock_guard<std::mutex> lock(mu_);
  index_storage_source_ = std::move(storage);
}

void Metrics::SetIndexMaxEntries(uint64_t max_entries) {
  index_max_entries_->Add({}).Set(static_cast<double>(max_entries));
}

void Metrics::SetChunkingBackend(absl::string_view algorithm, size_t threads,
                                 absl::string_view backend) {
  chunking_backend_
      ->Add({{"algorithm", std::string(algorithm)},
             {"threads", absl::StrCat(threads)},
             {"backend", std::string(backend)}})
      .Set(1);
}

void Metrics::WatchQueueDepth(std::function<size_t()> depth) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_depth_source_ = std::move(depth);
}

void Metrics::WatchStreamMemory(std::function<StreamMemoryUse()> use) {
  std::lock_guard<std::mutex> lock(mu_);
  stream_memory_source_ = std::move(use);
}

void Metrics::Refresh() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_depth_source_) {
    queue_depth_->Set(static_cast<double>(queue_depth_source_()));
  }
  if (stream_memory_source_) {
    const StreamMemoryUse use = stream_memory_source_();
    stream_memory_reserved_->Set(static_cast<double>(use.reserved));
    stream_memory_waiting_->Set(static_cast<double>(use.waiting_bytes));
    stream_memory_limit_->Set(static_cast<double>(use.limit));
    streams_waiting_for_memory_->Set(
        static_cast<double>(use.waiting_streams));
  }
  const std::optional<uint64_t> entries =
      index_entries_source_ ? index_entries_source_() : std::nullopt;
  if (entries.has_value()) {
    if (index_entries_gauge_ == nullptr) {
      index_entries_gauge_ = &index_entries_->Add({});
    }
    index_entries_gauge_->Set(static_cast<double>(*entries));
  } else if (index_entries_gauge_ != nullptr) {
    index_entries_->Remove(index_entries_gauge_);
    index_entries_gauge_ = nullptr;
  }
  RefreshIndexWaitsLocked();
  RefreshIndexStorageLocked();
}

void Metrics::RefreshIndexStorageLocked() const {
  const std::optional<IndexStorage> now =
      index_storage_source_ ? index_storage_source_() : std::nullopt;
  if (!now.has_value()) return;
  if (!storage_.has_value()) {
    StorageSamples s;
    s.disk = &storage_families_.disk->Add({});
    s.pending = &storage_families_.pending->Add({});
    s.running = &storage_families_.running->Add({});
    s.cache_used = &storage_families_.cache->Add({{"state", "used"}});
    s.cache_capacity = &storage_families_.cache->Add({{"state", "capacity"}});
    s.stall = &storage_families_.stall->Add({});
    s.hits = &storage_families_.requests->Add({{"result", "hit"}});
    s.misses = &storage_families_.requests->Add({{"result", "miss"}});
    storage_ = s;
  }
  StorageSamples& s = *storage_;
  s.disk->Set(static_cast<double>(now->disk_bytes));
  s.pending->Set(static_cast<double>(now->pending_compaction_bytes));
  s.running->Set(static_cast<double>(now->running_compactions));
  s.cache_used->Set(static_cast<double>(now->cache_bytes));
  s.cache_capacity->Set(static_cast<double>(now->cache_capacity));
  // The source counts from the start; the counters take what is new.
  s.stall->Increment(
      static_cast<double>(now->stall_micros - s.seen.stall_micros) / 1e6);
  s.hits->Increment(static_cast<double>(now->cache_hits - s.seen.cache_hits));
  s.misses->Increment(
      static_cast<double>(now->cache_misses - s.seen.cache_misses));
  s.seen = *now;
}

void Metrics::RefreshIndexWaitsLocked() const {
  const std::optional<IndexWaits> waits =
      index_waits_source_ ? index_waits_source_() : std::nullopt;
  if (!waits.has_value()) return;
  if (index_waiting_gauge_ == nullptr) {
    index_waiting_gauge_ = &index_waiting_->Add({});
    index_recovered_ = &index_waits_->Add({{"result", "recovered"}});
    index_expired_ = &index_waits_->Add({{"result", "expired"}});
  }
  index_waiting_gauge_->Set(static_cast<double>(waits->waiting));
  // The source counts from the start; the counters take what is new.
  index_recovered_->Increment(
      static_cast<double>(waits->recovered - index_waits_seen_.recovered));
  index_expired_->Increment(
      static_cast<double>(waits->expired - index_waits_seen_.expired));
  index_waits_seen_ = *waits;
}

IndexOpMetrics Metrics::ForIndexOp(absl::string_view backend,
                                   absl::string_view op) {
  const std::string b(backend);
  const std::string o(op);
  IndexOpMetrics m;
  m.ok = &index_requests_->Add({{"backend", b}, {"op", o}, {"result", "ok"}});
  m.error =
      &index_requests_->Add({{"backend", b}, {"op", o}, {"result", "error"}});
  m.duration =
      &index_duration_->Add({{"backend", b}, {"op", o}}, IndexBuckets());
  return m;
}

GrpcMethodMetrics Metrics::ForGrpcMethod(absl::string_view type,
                                         absl::string_view service,
                                         absl::string_view method) {
  prometheus::Labels labels{{"grpc_type", std::string(type)},
                            {"grpc_service", std::string(service)},
                            {"grpc_method", std::string(method)}};
  GrpcMethodMetrics m;
  m.started = &grpc_started_->Add(labels);
  m.handling_seconds = &grpc_handling_->Add(labels, GrpcBuckets());
  for (int code = 0; code < 17; ++code) {
    labels["grpc_code"] = kGrpcCodes[code];
    m.handled[code] = &grpc_handled_->Add(labels);
  }
  return m;
}

}  // namespace chunkd::metrics
