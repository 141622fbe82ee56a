#include "app/server_assembly.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "app/shutdown.h"
#include "app/start_up.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "pipeline/hint_cache.h"
#include "service/chunk_service.h"
#include "service/connection_guard.h"
#include "service/grpc_metrics.h"
#include "service/index_health.h"
#include "service/log_throttle.h"
#include "service/memory_budget.h"
#include "service/periodic.h"

namespace chunkd::app {
namespace {

// How often the index's reachability is probed for the health service.
constexpr absl::Duration kIndexHealthInterval = absl::Seconds(1);
// Free memory goes back to the OS this long after the last stream ended.
constexpr absl::Duration kIdleTrimDelay = absl::Seconds(1);
// Failed TLS handshakes and closed connections: one log line per kind and
// interval.
constexpr absl::Duration kAbuseLogInterval = absl::Seconds(10);
// Keepalive: clients may ping this often without data (more often is a
// strike; two strikes close the connection); chunkd pings an idle client
// this often and gives up on it after the timeout.
constexpr int kMinClientPingIntervalMs = 30'000;
constexpr int kKeepaliveTimeMs = 60'000;
constexpr int kKeepaliveTimeoutMs = 20'000;
// The flow-control window a stream offers beyond the message it reads.
constexpr uint64_t kStreamLookaheadBytes = uint64_t{1} << 20;
// Least memory gRPC's own buffers may use (ResourceQuota).
constexpr uint64_t kMinGrpcQuota = uint64_t{256} << 20;

// What clients can cause at will (failed TLS handshakes, connections
// closed): counted, and logged as one line per interval (never a line
// each).
class AbuseLog {
 public:
  explicit AbuseLog(metrics::Metrics& metrics)
      : log_(kAbuseLogInterval,
             [](const std::string& line) {
               std::fprintf(stderr, "chunkd: %s\n", line.c_str());
             }),
        grpc_log_filter_(
            &log_,
            [&metrics] { metrics.tls_handshake_failures().Increment(); }),
        flusher_(kAbuseLogInterval, [this] { log_.Flush(); }) {
    flusher_.Start();
  }
  AbuseLog(const AbuseLog&) = delete;
  AbuseLog& operator=(const AbuseLog&) = delete;

  service::LogThrottle& log() { return log_; }

  // Stops the periodic flush and writes what is left.
  void Stop() {
    flusher_.Stop();
    log_.Flush();
  }

 private:
  service::LogThrottle log_;
  service::GrpcLogFilter grpc_log_filter_;
  service::PeriodicThread flusher_;
};

// --max_stream_rate_per_connection: closes connections that open streams
// too fast (HTTP/2 rapid reset), counted and logged.
std::unique_ptr<service::ConnectionGuard> MakeConnectionGuard(
    uint32_t stream_rate, metrics::Metrics& metrics,
    service::LogThrottle& abuse_log) {
  prometheus::Counter& closed_for_rate =
      metrics.ConnectionsClosed("stream_rate");
  return std::make_unique<service::ConnectionGuard>(
      stream_rate,
      [&closed_for_rate, &abuse_log, stream_rate](const std::string& peer) {
        closed_for_rate.Increment();
        abuse_log.Note(
            absl::StrCat("connections closed for opening streams faster "
                         "than --max_stream_rate_per_connection (",
                         stream_rate, "/s)"),
            peer);
      });
}

// The gRPC metrics interceptor, and /metrics served on `metrics_listen`
// unless it is empty.
absl::StatusOr<std::unique_ptr<service::GrpcMetricsInterceptorFactory>>
ServeMetrics(metrics::Metrics& metrics, const std::string& metrics_listen) {
  auto grpc_metrics = service::GrpcMetricsInterceptorFactory::Create(
      &metrics, {v1::ChunkService::service_full_name(), "grpc.health.v1.Health",
                 "grpc.reflection.v1alpha.ServerReflection"});
  if (!grpc_metrics.ok()) return grpc_metrics.status();
  if (!metrics_listen.empty()) {
    absl::Status serving = metrics.Serve(metrics_listen);
    if (!serving.ok()) return serving;
  }
  return grpc_metrics;
}

// The hint cache's size as planned, in entries.
size_t HintCacheEntries(uint64_t mib) {
  return mib * (uint64_t{1} << 20) / pipeline::HintCache::kBytesPerEntry;
}

// What RunServer prepared before anything serves, each checked.
struct Prepared {
  service::MemoryPlan memory;
  StreamLimits limits;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::unique_ptr<service::TokenTable> tokens;  // nullptr: no --auth_tokens
  index::IndexOptions index_options;
  std::unique_ptr<index::FingerprintIndex> index;
  Backends backends;
};

// What the service works with, each owned by Serve.
struct ServiceParts {
  index::FingerprintIndex* index;
  pipeline::HintCache* hint_cache;
  pipeline::WorkerPool* pool;
  metrics::Metrics* metrics;
  service::ConnectionGuard* guard;  // nullptr: no stream rate limit
  service::MemoryBudget* budget;
  service::FairBudget* stream_memory;
};

service::ServiceOptions MakeServiceOptions(const ServerConfig& config,
                                           const Prepared& prepared,
                                           const ServiceParts& parts) {
  const StreamLimits& limits = prepared.limits;
  service::ServiceOptions options;
  options.index = parts.index;
  options.hint_cache = parts.hint_cache;
  // With an index in Redis or on disk the cache saves a round trip or a
  // read per duplicate chunk; a lookup in chunkd's memory costs less.
  options.hint_cache_all_chunks = !IndexPlacementOf(config).in_process_memory;
  options.pool = parts.pool;
  options.metrics = parts.metrics;
  options.max_message_bytes = limits.max_message;
  options.max_inflight_bytes = limits.max_inflight;
  options.limits = limits.registry;
  options.stream_idle_timeout = limits.idle_timeout;
  options.guard = parts.guard;
  options.memory = parts.budget;
  options.stream_memory = parts.stream_memory;
  options.estimate_max_entries = limits.estimate_max_entries;
  options.stream_settings.window =
      service::WindowBytes(parts.pool->parallelism());
  options.stream_settings.max_message_bytes = limits.max_message;
  options.stream_settings.max_inflight_bytes = limits.max_inflight;
  options.auth = prepared.tokens.get();
  options.version = CHUNKD_VERSION;
  options.chunking_backend = KernelName(prepared.backends.kernel);
  options.engine.kernel = prepared.backends.kernel;
  options.engine.executor = parts.pool;
  return options;
}

// HTTP/2 limits, keepalive, gRPC's memory quota and message size.
void ConfigureBuilder(grpc::ServerBuilder& builder, grpc::ResourceQuota& quota,
                      const StreamLimits& limits) {
  // One process per port: gRPC would otherwise set SO_REUSEPORT, and a
  // second chunkd would share the port (and split the clients between two
  // memory indexes).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(std::min<uint32_t>(
                                 INT_MAX, limits.streams_per_connection)));
  if (limits.connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(std::min<int64_t>(
            INT_MAX, absl::ToInt64Milliseconds(limits.connection_idle))));
  }
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      kMinClientPingIntervalMs);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             kKeepaliveTimeoutMs);
  // What HTTP/2 flow control lets into a stream its reader has not asked
  // for: 1 MiB at most, within the memory plan's kGrpcBytesPerStream. BDP
  // probing would grow every stream's window with the connection's
  // throughput, also for streams that wait for their memory and read
  // nothing; a read of a larger message still opens the window to it (those
  // bytes are reserved from --memory_budget first).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES,
                             static_cast<int>(kStreamLookaheadBytes));
  // gRPC's own buffers (flow-control windows, read buffers, call state)
  // answer to a quota as large as what the memory plan counts for them and
  // the request bytes (--memory_budget plus kGrpcBytesPerStream a stream),
  // with a floor: near its quota gRPC shrinks the windows it offers, and at
  // the quota it cancels streams ("Buffers full"), which must not happen
  // while chunkd's own budgets hold.
  quota.Resize(std::max<uint64_t>(
      limits.memory_budget +
          uint64_t{limits.registry.max_streams} * service::kGrpcBytesPerStream,
      kMinGrpcQuota));
  builder.SetResourceQuota(quota);
  // Leave room above the data limit so that a slightly larger message
  // reaches the service and gets an error naming the limit; far larger ones
  // are refused by gRPC itself, also with RESOURCE_EXHAUSTED.
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(
      INT_MAX, limits.max_message * 2 + (uint64_t{1} << 20))));
}

using InterceptorFactories = std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>;

// The connection guard first, then the gRPC metrics.
InterceptorFactories Interceptors(
    std::unique_ptr<service::ConnectionGuard> guard,
    std::unique_ptr<service::GrpcMetricsInterceptorFactory> metrics) {
  InterceptorFactories interceptors;
  interceptors.push_back(std::move(guard));
  interceptors.push_back(std::move(metrics));
  return interceptors;
}

// Dedup needs the index, Chunk does not: the index's reachability has a
// health status of its own (set by the returned callback), probed off the
// serving threads.
service::IndexHealthMonitor::Callback ReportIndexHealth(
    grpc::HealthCheckServiceInterface* health) {
  return [health](const absl::Status& status) {
    health->SetServingStatus(service::kDedupHealthService, status.ok());
    if (status.ok()) {
      std::fprintf(stderr, "chunkd: index serving; %s SERVING\n",
                   service::kDedupHealthService);
    } else if (absl::IsResourceExhausted(status)) {
      std::fprintf(stderr,
                   "chunkd: %s; %s NOT_SERVING until the index has room "
                   "(Chunk, FindMissing, Release and Dedup of indexed "
                   "chunks keep working)\n",
                   std::string(status.message()).c_str(),
                   service::kDedupHealthService);
    } else {
      std::fprintf(stderr,
                   "chunkd: %s; %s NOT_SERVING until the index is back "
                   "(Chunk keeps serving)\n",
                   std::string(status.message()).c_str(),
                   service::kDedupHealthService);
    }
  };
}

// Publishes the health statuses at once after the server started: the
// Dedup one from the index's first probe, `first`, run before the port
// served, then chunkd.v1.ChunkService, so that a client that found the
// latter SERVING finds the former set; then probes the index on.
std::unique_ptr<service::IndexHealthMonitor> StartHealth(
    grpc::HealthCheckServiceInterface* health, index::FingerprintIndex* index,
    const absl::Status& first) {
  service::IndexHealthMonitor::Callback report = ReportIndexHealth(health);
  report(first);
  health->SetServingStatus("chunkd.v1.ChunkService", true);
  auto monitor = std::make_unique<service::IndexHealthMonitor>(
      index, kIndexHealthInterval, std::move(report));
  monitor->SetReported(first);
  monitor->Start();
  return monitor;
}

// The allocator keeps what a burst freed (ConfigureMalloc); it goes back
// to the OS once streams have stopped.
std::unique_ptr<service::IdleTrimmer> StartIdleTrimmer(
    service::ChunkServiceImpl& service) {
  auto trimmer = std::make_unique<service::IdleTrimmer>(
      service::IdleTrimmer::Options{absl::Milliseconds(250), kIdleTrimDelay},
      [&service] {
        return service::StreamActivity{service.active_streams(),
                                       service.streams_started()};
      },
      [&service] {
        // The pooled request buffers first, or their pages stay.
        service.ReleaseIdleBuffers();
        service::TrimMalloc();
      });
  trimmer->Start();
  return trimmer;
}

// Everything that needs no other part running: the memory plan, the
// limits, the credentials, the tokens, the index (opened) and the backends.
absl::StatusOr<Prepared> Prepare(const ServerConfig& config,
                                 const service::MallocSetup& malloc_setup) {
  Prepared p;
  absl::StatusOr<service::MemoryPlan> memory = PlanMemory(config, malloc_setup);
  if (!memory.ok()) return memory.status();
  p.memory = *std::move(memory);
  p.limits = StreamLimitsOf(config, p.memory);
  auto credentials = ServerCredentials(config);
  if (!credentials.ok()) return credentials.status();
  p.credentials = *std::move(credentials);
  auto tokens = LoadTokens(config);
  if (!tokens.ok()) return tokens.status();
  p.tokens = *std::move(tokens);
  p.index_options = IndexOptionsOf(config, p.memory);
  std::fprintf(stderr, "chunkd: %s\n", malloc_setup.description.c_str());
  auto index = OpenIndex(config, p.index_options);
  if (!index.ok()) return index.status();
  p.index = *std::move(index);
  auto backends = ChooseBackends(config);
  if (!backends.ok()) return backends.status();
  p.backends = *backends;
  return p;
}

// The rest of the assembly, the serving and the drain. Declaration order is
// destruction order in reverse: the pool's tasks finish while the metrics
// they update still exist.
absl::Status Serve(const ServerConfig& config, Prepared& p,
                   const sigset_t& signals) {
  metrics::Metrics metrics(CHUNKD_VERSION, KernelName(p.backends.kernel));
  AbuseLog abuse_log(metrics);
  auto guard = MakeConnectionGuard(p.limits.stream_rate, metrics,
                                   abuse_log.log());
  service::ConnectionGuard* const guard_ptr = guard.get();
  InstrumentIndex(p.index, metrics, p.index_options.max_entries);
  auto grpc_metrics = ServeMetrics(metrics, config.metrics_listen);
  if (!grpc_metrics.ok()) return grpc_metrics.status();

  const size_t threads =
      WorkerThreads(config, std::max(1u, std::thread::hardware_concurrency()));
  pipeline::WorkerPool pool(threads);
  metrics.WatchQueueDepth([&pool] { return pool.queue_depth(); });
  ChooseChunkingKernels(p.backends.kernel, pool, metrics);
  pipeline::HintCache hint_cache(HintCacheEntries(p.memory.hint_cache_mib));
  service::MemoryBudget budget(p.limits.memory_budget);
  service::FairBudget stream_memory(p.limits.stream_memory);
  metrics.WatchStreamMemory([&stream_memory] {
    metrics::StreamMemoryUse use;
    use.waiting_streams = stream_memory.waiting();
    use.waiting_bytes = stream_memory.waiting_bytes();
    use.reserved = stream_memory.used();
    use.limit = stream_memory.limit();
    return use;
  });
  service::ChunkServiceImpl service(MakeServiceOptions(
      config, p,
      {p.index.get(), &hint_cache, &pool, &metrics,
       p.limits.stream_rate > 0 ? guard_ptr : nullptr, &budget,
       &stream_memory}));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, p.credentials, &port);
  grpc::ResourceQuota quota("chunkd");
  ConfigureBuilder(builder, quota, p.limits);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(
      Interceptors(std::move(guard), *std::move(grpc_metrics)));
  // The index's first probe, before the port serves (docs/operations.md,
  // "Health checking"), so that its status is published with the others.
  const absl::Status index_status = p.index->Health();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    const std::string why = WhyCannotListen(config.listen);
    return absl::UnavailableError(absl::StrCat("cannot listen on --listen ",
                                               config.listen,
                                               why.empty() ? "" : ": ", why));
  }
  guard_ptr->set_local_port(port);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  const auto index_health = StartHealth(health, p.index.get(), index_status);
  const auto trimmer = StartIdleTrimmer(service);
  LogServing(config, port, p.tokens != nullptr, p.index->backend(), threads,
             p.backends);
  LogLimits(p.limits, p.tokens != nullptr);

  Drain(WaitForSignal(signals, *p.index), config.shutdown_grace,
        {&service, p.index.get(), index_health.get(), trimmer.get(), health,
         server.get(), port});
  metrics.WatchQueueDepth(nullptr);    // the pool goes first
  metrics.WatchStreamMemory(nullptr);  // and the stream memory
  metrics.WatchIndexEntries(nullptr);
  metrics.WatchIndexWaits(nullptr);
  metrics.WatchIndexStorage(nullptr);
  abuse_log.Stop();
  return absl::OkStatus();
}

}  // namespace

absl::Status RunServer(const ServerConfig& config,
                       const service::MallocSetup& malloc_setup,
                       const sigset_t& signals) {
  absl::StatusOr<Prepared> prepared = Prepare(config, malloc_setup);
  if (!prepared.ok()) return prepared.status();
  return Serve(config, *prepared, signals);
}

}  // namespace chunkd::app
