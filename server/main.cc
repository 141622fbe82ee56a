// chunkd: the chunking and deduplication server. Flags, wiring, ServerBuilder.
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chunkd/chunker.h"
#include "chunking/auto_kernel.h"
#include "chunking/kernels/kernels.h"
#include "fingerprint/content_key.h"
#include "fingerprint/sha256_mb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/resource_quota.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/hint_cache.h"
#include "pipeline/worker_pool.h"
#include "platform/error_reason.h"
#include "service/allocator.h"
#include "service/chunk_service.h"
#include "service/connection_guard.h"
#include "service/goaway.h"
#include "service/grpc_metrics.h"
#include "service/index_health.h"
#include "service/instrumented_index.h"
#include "service/log_throttle.h"
#include "service/memory_limit.h"
#include "service/memory_plan.h"
#include "service/periodic.h"
#include "service/tls_files.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "gRPC address to serve on, host:port");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics address, host:port; empty disables it");
ABSL_FLAG(std::string, index, "memory",
          "fingerprint index: 'memory' (embedded, lost on restart), "
          "'rocksdb:///path[?sync=always|batch|none&cache_mib=N&"
          "checkpoint_dir=/path]' (embedded, kept in a RocksDB database in "
          "/path; SIGUSR1 writes a checkpoint), "
          "'redis://[[user]:password@]host:port[/db]' or "
          "'redis-cluster://host:port[,host:port...]', both optionally "
          "followed by ?password_file=PATH&connect_timeout_ms=N&"
          "command_timeout_ms=N&pool_size=N&failover_wait_ms=N (overriding "
          "the --redis_ flags)");
ABSL_FLAG(std::string, redis_password_file, "",
          "file holding the Redis password (e.g. a mounted Kubernetes "
          "secret; trailing newline stripped), used when the --index URL "
          "carries no password; else $CHUNKD_REDIS_PASSWORD is used");
ABSL_FLAG(int, redis_pool_size, 16,
          "connections per Redis server (1..1024)");
ABSL_FLAG(absl::Duration, redis_connect_timeout, absl::Seconds(1),
          "bound on connecting to Redis, handshake included");
ABSL_FLAG(absl::Duration, redis_command_timeout, absl::Seconds(2),
          "bound on each Redis round trip; a slower server counts as down");
ABSL_FLAG(absl::Duration, redis_failover_wait, absl::Seconds(30),
          "how long an index call waits for Redis to come back (a Redis "
          "Cluster failover, a restarting server) before it fails with "
          "UNAVAILABLE, re-sending meanwhile what is safe to re-send; set it "
          "above the cluster's node timeout plus a few seconds; 0 turns "
          "waiting off");
ABSL_FLAG(uint64_t, max_message_bytes, uint64_t{4} << 20,
          "largest data field of one request, in bytes");
ABSL_FLAG(uint64_t, max_inflight_bytes, uint64_t{16} << 20,
          "unprocessed bytes of one stream at which chunkd stops reading it");
ABSL_FLAG(uint32_t, threads, 0,
          "worker threads shared by all streams, which also cut the segments "
          "of one large stream in parallel; 0 means one per core");
ABSL_FLAG(std::string, backend, "",
          "chunking backend (stage-1 kernel) of every algorithm: scalar, avx2 "
          "or avx512; empty means $CHUNKD_BACKEND when set, else auto: per "
          "algorithm the fastest on this CPU, calibrated at start-up. An "
          "unknown or unsupported backend is an error");
ABSL_FLAG(uint32_t, max_streams, 128,
          "Chunk and Dedup streams served at once; one more is refused with "
          "RESOURCE_EXHAUSTED. Left unset under a memory limit: as many "
          "streams of typical parameters (Dedup, fastcdc's default sizes) "
          "as fit it (at most the default)");
ABSL_FLAG(int64_t, max_streams_per_token, -1,
          "with --auth_tokens, Chunk and Dedup streams one bearer token may "
          "run at once (one more is refused with RESOURCE_EXHAUSTED); -1 "
          "means a quarter of --max_streams, 0 no limit");
ABSL_FLAG(uint32_t, max_streams_per_ip, 0,
          "Chunk and Dedup streams one client IP address may run at once; 0 "
          "(the default) means no limit, as behind a proxy every client may "
          "share one address");
ABSL_FLAG(uint32_t, max_streams_per_connection, 32,
          "HTTP/2 streams (calls of any kind) one connection may have open, "
          "advertised as SETTINGS_MAX_CONCURRENT_STREAMS; chunkd also "
          "refuses a connection's Chunk and Dedup streams past it, counting "
          "the streams it reset until chunkd has ended them");
ABSL_FLAG(uint32_t, max_stream_rate_per_connection, 1000,
          "new streams per second one connection may open (bursts of as many "
          "included); past it ChunkService calls are refused with "
          "RESOURCE_EXHAUSTED, and a connection that opens as many again is "
          "closed (HTTP/2 rapid reset); 0 turns this off");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "a Chunk or Dedup stream that waits this long on its client (no "
          "request arriving, no response read) ends with DEADLINE_EXCEEDED; "
          "0 turns this off");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "a client connection with no call for this long is closed "
          "(GOAWAY); clients reconnect on their next call");
ABSL_FLAG(uint64_t, memory_budget, uint64_t{1} << 30,
          "request bytes all streams together may hold (received and not yet "
          "processed, plus one max_message_bytes reservation per pending "
          "read); at the budget streams stop reading. Must be at least "
          "--max_streams x --max_message_bytes, so an idle stream never "
          "blocks the others. Left unset under a memory limit: sized to it");
ABSL_FLAG(int64_t, index_max_entries, -1,
          "entries the memory or rocksdb index may hold (a memory index "
          "entry takes at most about 190 bytes with hints, write-token "
          "records and growth); a Dedup that would add one more ends with "
          "RESOURCE_EXHAUSTED; -1 means sized: for the memory index under a "
          "memory limit a quarter of what it leaves, else what half of "
          "--memory_budget holds at 400 bytes each (1342177 for 1 GiB); for "
          "rocksdb no limit; 0 no limit");
ABSL_FLAG(uint64_t, index_cache_mib, 256,
          "memory for the rocksdb index's block cache, its write buffers "
          "included (what it keeps resident whatever the number of entries); "
          "left unset under a memory limit: a quarter of what it leaves");
ABSL_FLAG(uint64_t, hint_cache_mib, 64,
          "memory for the RapidCDC hint cache (keyed content hash -> "
          "SHA-256 and next sizes, about 176 bytes per chunk), which lets "
          "Dedup with hints follow them without hashing on the way; 0 turns "
          "it off. Left unset under a memory limit: at most a 16th of what "
          "it leaves");
ABSL_FLAG(uint64_t, stream_memory_budget, 0,
          "memory all streams together may hold beyond their request bytes: "
          "each reserves, once its parameters arrive, its worst case for "
          "them (chunker buffers and bitmaps, hint follower copies, "
          "responses of a client that stops reading); a stream that does "
          "not fit waits its turn without reading, one that never could is "
          "refused with RESOURCE_EXHAUSTED. 0 (the default): sized: without "
          "a memory limit room for every stream at its largest, under one "
          "what the limit leaves");
ABSL_FLAG(std::string, memory_limit_file, "",
          "file holding the memory limit chunkd sizes --max_streams, "
          "--memory_budget, --stream_memory_budget, --index_max_entries and "
          "--hint_cache_mib to when they are left unset, as bytes or 'max' "
          "(no limit); empty means "
          "the cgroup's: memory.max (v2) or memory.limit_in_bytes (v1) of "
          "this process's memory cgroup and its parents, the smallest");
// The memory plan's defaults without a limit are the flags' own.
static_assert(chunkd::service::kDefaultMaxStreams == 128);
static_assert(chunkd::service::kDefaultMemoryBudget == uint64_t{1} << 30);
static_assert(chunkd::service::kDefaultHintCacheMib == 64);
static_assert(chunkd::service::kDefaultIndexCacheMib == 256);
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain for TLS; with --tls_key turns TLS on");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it "
          "signed (mutual TLS)");
ABSL_FLAG(std::string, auth_tokens, "",
          "file of bearer tokens, one per line: 'TOKEN ns1,ns2' or 'TOKEN *'; "
          "when set, ChunkService RPCs need 'authorization: Bearer TOKEN' "
          "(health and reflection stay open)");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(30),
          "on SIGINT/SIGTERM, how long running streams may take to finish "
          "before they are cancelled");

namespace {

constexpr uint64_t kMinMessageBytes = 1024;
constexpr uint64_t kMaxMessageBytes = uint64_t{256} << 20;
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

int Fail(const std::string& message) {
  std::fprintf(stderr, "chunkd: %s\n", message.c_str());
  return 2;
}

// Why `listen` ("host:port") cannot be bound now, by trying it; empty when
// it can (gRPC failed for another reason).
std::string WhyCannotListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return "no port in the address";
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                             listen.substr(colon + 1).c_str(), &hints, &found);
  if (rc != 0) return absl::StrCat("cannot resolve it: ", gai_strerror(rc));
  std::string why;
  for (addrinfo* a = found; a != nullptr && why.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = errno == EADDRINUSE
                ? "the address is already in use (another process listens "
                  "there; chunkd never shares a port)"
                : std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

// Insecure, TLS or mutual TLS, from the --tls_* flags.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  const std::string client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() && key.empty()) {
    if (!client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (cert.empty() || key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key");
  }
  auto files = chunkd::service::LoadTlsFiles(cert, key, client_ca);
  if (!files.ok()) return files.status();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = std::move(files->cert_chain);
  pair.private_key = std::move(files->private_key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!client_ca.empty()) {
    options.pem_root_certs = std::move(files->client_ca);
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// Waits for SIGINT or SIGTERM and returns it; meanwhile each SIGUSR1
// writes a checkpoint of the index (an embedded database's).
int WaitForSignal(const sigset_t& signals,
                  chunkd::index::FingerprintIndex& index) {
  for (;;) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) return sig;
    absl::StatusOr<std::string> checkpoint = index.Checkpoint();
    if (checkpoint.ok()) {
      std::fprintf(stderr, "chunkd: SIGUSR1: index checkpoint written to %s\n",
                   checkpoint->c_str());
    } else {
      std::fprintf(stderr, "chunkd: SIGUSR1: no index checkpoint: %s\n",
                   std::string(checkpoint.status().message()).c_str());
    }
  }
}

int Fail(const absl::Status& status) {
  return Fail(std::string(status.message()));
}

// Where flags are defined, as --help and --helpfull name it: chunkd's own
// sources as "server/<file>" wherever the tree was built, others with their
// leading slashes stripped (Abseil's default).
std::string NormalizeFlagFile(absl::string_view filename) {
  absl::string_view tree = __FILE__;  // this file's directory
  absl::ConsumeSuffix(&tree, "main.cc");
  while (absl::ConsumePrefix(&tree, "/")) {
  }
  while (absl::ConsumePrefix(&filename, "/")) {
  }
  if (!tree.empty() && absl::ConsumePrefix(&filename, tree)) {
    return absl::StrCat("server/", filename);
  }
  return std::string(filename);
}

// True for the flags of chunkd's own sources, false for Abseil's --flagfile
// and friends: what --help lists. Abseil's default looks for flags in a file
// named after the binary ("chunkd.cc"), finds none and prints "No flags
// matched".
bool IsChunkdFlagFile(absl::string_view filename) {
  return absl::StartsWith(NormalizeFlagFile(filename), "server/");
}

// What --version prints: the release (the repository's VERSION file), then
// how this binary was built.
std::string VersionString() {
#if defined(__clang__)
  const char* const compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  const char* const compiler = "GCC " __VERSION__;
#else
  const char* const compiler = "an unknown compiler";
#endif
  return absl::StrCat("chunkd ", CHUNKD_VERSION, "\n", CHUNKD_BUILD_TYPE,
                      " build with ", compiler, ", gRPC ", grpc::Version(),
                      "\n");
}

// Usage, flags, and Abseil's mutex deadlock detection off. --help (every
// chunkd flag with its default), --helpfull (Abseil's flags too) and
// --version print to stdout and exit 0.
void ParseFlags(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = IsChunkdFlagFile;
  usage.contains_helpshort_flags = IsChunkdFlagFile;
  usage.contains_helppackage_flags = IsChunkdFlagFile;
  usage.version_string = VersionString;
  usage.normalize_filename = NormalizeFlagFile;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "content-defined chunking and deduplication over gRPC.\n"
      "Usage: chunkd [--listen HOST:PORT] [--metrics_listen HOST:PORT] "
      "[--index memory|redis://...] [--flagfile FILE] ...\n"
      "docs/operations.md (\"Server flags\") describes every flag.");
  // absl::ParseCommandLine exits 1 after printing help (Abseil 20220623,
  // Debian bookworm's): parse with the usage flags left alone, then print
  // what they ask for and exit 0, as --version already does.
  absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(
          std::cout, absl::ProgramUsageMessage()) != -1) {
    std::cout.flush();
    std::exit(0);
  }
  // Debian builds Abseil with mutex deadlock detection on; it costs gRPC's
  // every lock a graph update (5 % of the CPU samples under a flood of
  // calls, by perf) and finds nothing in a release build.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

// Every thread started from here on inherits the blocked signals, so only
// the sigwait in WaitForSignal sees SIGINT, SIGTERM and SIGUSR1.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// What bounds the streams and connections, from the flags.
struct StreamLimits {
  uint64_t max_message = 0;
  uint64_t max_inflight = 0;
  uint64_t memory_budget = 0;
  uint64_t stream_memory = 0;
  chunkd::service::RegistryLimits registry;
  uint32_t streams_per_connection = 0;
  absl::Duration idle_timeout;
  absl::Duration connection_idle;
};

// --max_message_bytes and --max_inflight_bytes.
absl::Status ValidateMessageFlags(StreamLimits* limits) {
  const uint64_t max_message = absl::GetFlag(FLAGS_max_message_bytes);
  if (max_message < kMinMessageBytes || max_message > kMaxMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes ", max_message, " is out of range [",
                     kMinMessageBytes, ", ", kMaxMessageBytes, "]"));
  }
  const uint64_t max_inflight = absl::GetFlag(FLAGS_max_inflight_bytes);
  if (max_inflight < max_message) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_inflight_bytes ", max_inflight,
                     " must be at least --max_message_bytes ", max_message));
  }
  limits->max_message = max_message;
  limits->max_inflight = max_inflight;
  return absl::OkStatus();
}

// --max_streams and --memory_budget as planned, --max_streams_per_ip and
// --max_streams_per_token.
absl::Status ValidateStreamFlags(const chunkd::service::MemoryPlan& memory,
                                 StreamLimits* limits) {
  const uint32_t max_streams = memory.max_streams;
  limits->memory_budget = memory.memory_budget;
  limits->stream_memory = memory.stream_memory;
  limits->registry.max_streams = max_streams;
  limits->registry.max_streams_per_ip = absl::GetFlag(FLAGS_max_streams_per_ip);
  const int64_t per_token = absl::GetFlag(FLAGS_max_streams_per_token);
  if (per_token < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_streams_per_token ", per_token,
                     " must be -1 (a quarter of --max_streams), 0 (no "
                     "limit) or a count"));
  }
  limits->registry.max_streams_per_token =
      per_token == -1 ? std::max<size_t>(1, max_streams / 4)
                      : static_cast<size_t>(per_token);
  return absl::OkStatus();
}

// --max_streams_per_connection, --stream_idle_timeout and
// --max_connection_idle.
absl::Status ValidateConnectionFlags(StreamLimits* limits) {
  limits->streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  if (limits->streams_per_connection == 0) {
    return absl::InvalidArgumentError(
        "--max_streams_per_connection must be at least 1");
  }
  // Also counted by chunkd: HTTP/2 resets let a client open streams past
  // the SETTINGS limit, and a reset stream lives until chunkd ends it. Twice
  // the SETTINGS limit, so that a client that cancels calls and at once
  // opens new ones (its HTTP/2 stack has forgotten the reset streams; chunkd
  // may not have ended them yet) is not refused, while a rapid reset still
  // holds at most that many.
  limits->registry.max_streams_per_connection =
      2 * size_t{limits->streams_per_connection};
  limits->idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  limits->connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  if (limits->idle_timeout < absl::ZeroDuration() ||
      limits->connection_idle < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--stream_idle_timeout and --max_connection_idle must not be "
        "negative");
  }
  return absl::OkStatus();
}

// --threads: 0 means one per core.
size_t WorkerThreads() {
  size_t threads = absl::GetFlag(FLAGS_threads);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  return threads;
}

// The flag's value when given on the command line or in a flagfile;
// nullopt when left at its default.
template <typename T>
std::optional<T> GivenFlag(const absl::Flag<T>& flag, absl::string_view name) {
  if (!absl::flags_internal::WasPresentOnCommandLine(name)) return std::nullopt;
  return absl::GetFlag(flag);
}

// The memory limit (--memory_limit_file, else the cgroup's) and the memory
// flags sized to it (service/memory_plan.h), logged.
// REQUIRES: ValidateMessageFlags passed.
absl::StatusOr<chunkd::service::MemoryPlan> PlanMemoryFromFlags(
    const StreamLimits& limits,
    const chunkd::service::MallocSetup& malloc_setup) {
  const std::string limit_file = absl::GetFlag(FLAGS_memory_limit_file);
  absl::StatusOr<chunkd::service::MemoryLimit> limit =
      limit_file.empty() ? chunkd::service::ReadCgroupMemoryLimit()
                         : chunkd::service::ReadMemoryLimitFile(limit_file);
  if (!limit.ok()) return limit.status();
  chunkd::service::MemoryInputs inputs;
  inputs.limit = limit->bytes;
  inputs.max_streams = GivenFlag(FLAGS_max_streams, "max_streams");
  inputs.memory_budget = GivenFlag(FLAGS_memory_budget, "memory_budget");
  inputs.index_max_entries =
      GivenFlag(FLAGS_index_max_entries, "index_max_entries");
  inputs.hint_cache_mib = GivenFlag(FLAGS_hint_cache_mib, "hint_cache_mib");
  // 0, given or not, means sized.
  inputs.stream_memory =
      GivenFlag(FLAGS_stream_memory_budget, "stream_memory_budget");
  if (inputs.stream_memory == uint64_t{0}) inputs.stream_memory.reset();
  inputs.max_message_bytes = limits.max_message;
  inputs.max_inflight_bytes = limits.max_inflight;
  inputs.threads = WorkerThreads();
  inputs.cores = std::max(1u, std::thread::hardware_concurrency());
  inputs.arenas = malloc_setup.configured ? malloc_setup.arena_max : 0;
  const absl::string_view backend =
      chunkd::index::BackendOfSpec(absl::GetFlag(FLAGS_index));
  inputs.memory_index = backend == "memory";
  inputs.rocksdb_index = backend == "rocksdb";
  inputs.index_cache_mib = GivenFlag(FLAGS_index_cache_mib, "index_cache_mib");
  absl::StatusOr<chunkd::service::MemoryPlan> plan =
      chunkd::service::PlanMemory(inputs);
  if (!plan.ok()) return plan.status();
#if defined(__GLIBC__)
  // Fewer arenas under a limit; still the only thread (ConfigureMalloc).
  if (plan->arenas != 0 && plan->arenas != malloc_setup.arena_max) {
    mallopt(M_ARENA_MAX, static_cast<int>(plan->arenas));
  }
#endif
  if (limit->bytes.has_value()) {
    std::fprintf(stderr,
                 "chunkd: memory limit %llu bytes (%s); sized to %.0f %% of "
                 "it: %s\n",
                 static_cast<unsigned long long>(*limit->bytes),
                 limit->source.c_str(), chunkd::service::kLimitShare * 100,
                 plan->summary.c_str());
  } else {
    std::fprintf(stderr, "chunkd: no memory limit (%s): %s\n",
                 limit->source.c_str(), plan->summary.c_str());
  }
  for (const std::string& warning : plan->warnings) {
    std::fprintf(stderr, "chunkd: warning: %s\n", warning.c_str());
  }
  return plan;
}

// Every limit of the streams and connections; `memory` gets the memory
// flags as planned.
absl::StatusOr<StreamLimits> StreamLimitsFromFlags(
    const chunkd::service::MallocSetup& malloc_setup,
    chunkd::service::MemoryPlan* memory) {
  StreamLimits limits;
  if (absl::Status s = ValidateMessageFlags(&limits); !s.ok()) return s;
  absl::StatusOr<chunkd::service::MemoryPlan> plan =
      PlanMemoryFromFlags(limits, malloc_setup);
  if (!plan.ok()) return plan.status();
  *memory = *std::move(plan);
  if (absl::Status s = ValidateStreamFlags(*memory, &limits); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateConnectionFlags(&limits); !s.ok()) return s;
  return limits;
}

// --auth_tokens: nullptr when unset.
absl::StatusOr<std::unique_ptr<chunkd::service::TokenTable>> LoadTokens() {
  const std::string tokens_path = absl::GetFlag(FLAGS_auth_tokens);
  if (tokens_path.empty()) {
    return std::unique_ptr<chunkd::service::TokenTable>();
  }
  auto table = chunkd::service::TokenTable::Load(tokens_path);
  if (!table.ok()) return table.status();
  return std::make_unique<chunkd::service::TokenTable>(*std::move(table));
}

// The --redis_* flags, and the entry limit as planned.
chunkd::index::IndexOptions IndexOptionsFromFlags(
    const chunkd::service::MemoryPlan& memory) {
  chunkd::index::IndexOptions index_options;
  index_options.redis_password_file = absl::GetFlag(FLAGS_redis_password_file);
  index_options.pool_size = absl::GetFlag(FLAGS_redis_pool_size);
  index_options.connect_timeout = absl::GetFlag(FLAGS_redis_connect_timeout);
  index_options.command_timeout = absl::GetFlag(FLAGS_redis_command_timeout);
  index_options.failover_wait = absl::GetFlag(FLAGS_redis_failover_wait);
  // A call waiting for Redis lends the worker pool a thread meanwhile.
  index_options.on_wait = chunkd::pipeline::WorkerPool::Blocking;
  index_options.max_entries = memory.index_max_entries;
  index_options.cache_bytes = memory.index_cache_mib << 20;
  index_options.warn = [](const std::string& warning) {
    std::fprintf(stderr, "chunkd: %s\n", warning.c_str());
  };
  return index_options;
}

// The index --index names; the log says which.
absl::StatusOr<std::unique_ptr<chunkd::index::FingerprintIndex>> OpenIndex(
    const std::string& index_spec,
    const chunkd::index::IndexOptions& index_options) {
  auto index = chunkd::index::CreateIndex(index_spec, index_options);
  if (!index.ok()) return index.status();
  std::string detail;
  if ((*index)->backend() == "memory" || (*index)->backend() == "rocksdb") {
    detail = index_options.max_entries == 0
                 ? ", no entry limit"
                 : absl::StrCat(", at most ", index_options.max_entries,
                                " entries (--index_max_entries)");
  }
  if ((*index)->backend() == "rocksdb") {
    absl::StrAppend(&detail, "; ", (*index)->EntryCount().value_or(0),
                    " entries kept from before, block cache ",
                    index_options.cache_bytes >> 20, " MiB");
  }
  std::fprintf(stderr, "chunkd: index %s%s\n",
               chunkd::index::RedactIndexSpec(index_spec).c_str(),
               detail.c_str());
  return index;
}

// The chunking kernel (--backend; nullptr: auto), and how fingerprints and
// content keys are computed.
struct Backends {
  const chunkd::chunking::kernels::Kernel* kernel = nullptr;
  const chunkd::fingerprint::Sha256Backend* sha256 = nullptr;
  chunkd::fingerprint::ContentKeyBackend content_key =
      chunkd::fingerprint::ContentKeyBackend::kOpenSsl;
};

// The chunking backend's name: the forced kernel's, or "auto".
const char* KernelName(const chunkd::chunking::kernels::Kernel* kernel) {
  return kernel == nullptr ? "auto" : kernel->name;
}

absl::StatusOr<Backends> BackendsFromFlags() {
  Backends backends;
  const std::string backend_flag = absl::GetFlag(FLAGS_backend);
  absl::StatusOr<const chunkd::chunking::kernels::Kernel*> kernel =
      backend_flag.empty()
          ? chunkd::chunking::kernels::ForcedKernel()
          : chunkd::chunking::kernels::FindKernel(backend_flag);
  if (!kernel.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(backend_flag.empty() ? "CHUNKD_BACKEND: " : "--backend: ",
                     kernel.status().message()));
  }
  backends.kernel = *kernel;
  // How sha256 fingerprints are computed ($CHUNKD_SHA256 or the best the CPU
  // runs); a bad value stops chunkd here rather than at the first chunk.
  absl::StatusOr<const chunkd::fingerprint::Sha256Backend*> sha256 =
      chunkd::fingerprint::DefaultSha256Backend();
  if (!sha256.ok()) return sha256.status();
  backends.sha256 = *sha256;
  // How the hint cache keys contents ($CHUNKD_CONTENT_KEY or the best the
  // CPU runs); a bad value stops chunkd here rather than at the first use.
  absl::StatusOr<chunkd::fingerprint::ContentKeyBackend> content_key =
      chunkd::fingerprint::DefaultContentKeyBackend();
  if (!content_key.ok()) return content_key.status();
  backends.content_key = *content_key;
  return backends;
}

// What clients can cause at will (failed TLS handshakes, connections
// closed): counted, and logged as one line per interval (never a line
// each).
class AbuseLog {
 public:
  explicit AbuseLog(chunkd::metrics::Metrics& metrics)
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

  chunkd::service::LogThrottle& log() { return log_; }

  // Stops the periodic flush and writes what is left.
  void Stop() {
    flusher_.Stop();
    log_.Flush();
  }

 private:
  chunkd::service::LogThrottle log_;
  chunkd::service::GrpcLogFilter grpc_log_filter_;
  chunkd::service::PeriodicThread flusher_;
};

// --max_stream_rate_per_connection: closes connections that open streams
// too fast (HTTP/2 rapid reset), counted and logged.
std::unique_ptr<chunkd::service::ConnectionGuard> MakeConnectionGuard(
    uint32_t stream_rate, chunkd::metrics::Metrics& metrics,
    chunkd::service::LogThrottle& abuse_log) {
  prometheus::Counter& closed_for_rate =
      metrics.ConnectionsClosed("stream_rate");
  return std::make_unique<chunkd::service::ConnectionGuard>(
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

// Counts and times the index's calls; a memory or rocksdb index's entries,
// a rocksdb index's storage, or a Redis index's waits for Redis, are
// exported too.
void InstrumentIndex(std::unique_ptr<chunkd::index::FingerprintIndex>& index,
                     chunkd::metrics::Metrics& metrics, uint64_t max_entries) {
  index = std::make_unique<chunkd::service::InstrumentedIndex>(std::move(index),
                                                               &metrics);
  if (index->FailoverWaits().has_value()) {
    metrics.WatchIndexWaits([index = index.get()]()
                                -> std::optional<chunkd::metrics::IndexWaits> {
      const auto c = index->FailoverWaits();
      if (!c.has_value()) return std::nullopt;
      return chunkd::metrics::IndexWaits{c->waiting, c->recovered, c->expired};
    });
  }
  if (index->Storage().has_value()) {
    metrics.WatchIndexStorage([index = index.get()]()
                                  -> std::optional<chunkd::metrics::IndexStorage> {
      const auto s = index->Storage();
      if (!s.has_value()) return std::nullopt;
      return chunkd::metrics::IndexStorage{
          s->disk_bytes,  s->pending_compaction_bytes, s->running_compactions,
          s->stall_micros, s->cache_hits, s->cache_misses, s->cache_bytes,
          s->cache_capacity};
    });
  }
  if (!index->EntryCount().has_value()) return;
  if (max_entries != 0) metrics.SetIndexMaxEntries(max_entries);
  metrics.WatchIndexEntries(
      [index = index.get()] { return index->EntryCount(); });
}

// The gRPC metrics interceptor, and /metrics served on `metrics_listen`
// unless it is empty.
absl::StatusOr<std::unique_ptr<chunkd::service::GrpcMetricsInterceptorFactory>>
ServeMetrics(chunkd::metrics::Metrics& metrics,
             const std::string& metrics_listen) {
  auto grpc_metrics = chunkd::service::GrpcMetricsInterceptorFactory::Create(
      &metrics, {chunkd::v1::ChunkService::service_full_name(),
                 "grpc.health.v1.Health",
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
  return mib * (uint64_t{1} << 20) /
         chunkd::pipeline::HintCache::kBytesPerEntry;
}

// What the service works with, each owned by main().
struct ServiceParts {
  chunkd::index::FingerprintIndex* index;
  bool index_outside_memory;  // redis, redis-cluster or rocksdb
  chunkd::pipeline::HintCache* hint_cache;
  chunkd::pipeline::WorkerPool* pool;
  chunkd::metrics::Metrics* metrics;
  chunkd::service::ConnectionGuard* guard;  // nullptr: no stream rate limit
  chunkd::service::MemoryBudget* budget;
  chunkd::service::FairBudget* stream_memory;
  const chunkd::service::TokenTable* auth;
  const chunkd::chunking::kernels::Kernel* kernel;
};

chunkd::service::ServiceOptions MakeServiceOptions(const ServiceParts& parts,
                                                   const StreamLimits& limits) {
  chunkd::service::ServiceOptions options;
  options.index = parts.index;
  options.hint_cache = parts.hint_cache;
  // With an index in Redis or on disk the cache saves a round trip or a
  // read per duplicate chunk.
  options.hint_cache_all_chunks = parts.index_outside_memory;
  options.pool = parts.pool;
  options.metrics = parts.metrics;
  options.max_message_bytes = limits.max_message;
  options.max_inflight_bytes = limits.max_inflight;
  options.limits = limits.registry;
  options.stream_idle_timeout = limits.idle_timeout;
  options.guard = parts.guard;
  options.memory = parts.budget;
  options.stream_memory = parts.stream_memory;
  options.stream_settings.window =
      chunkd::service::WindowBytes(parts.pool->parallelism());
  options.stream_settings.max_message_bytes = limits.max_message;
  options.stream_settings.max_inflight_bytes = limits.max_inflight;
  options.auth = parts.auth;
  options.version = CHUNKD_VERSION;
  options.chunking_backend = KernelName(parts.kernel);
  options.engine.kernel = parts.kernel;
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
      limits.memory_budget + uint64_t{limits.registry.max_streams} *
                                 chunkd::service::kGrpcBytesPerStream,
      kMinGrpcQuota));
  builder.SetResourceQuota(quota);
  // Leave room above the data limit so that a slightly larger message
  // reaches the service and gets an error naming the limit; far larger ones
  // are refused by gRPC itself, also with RESOURCE_EXHAUSTED.
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<uint64_t>(
      INT_MAX, limits.max_message * 2 + (uint64_t{1} << 20))));
}

// The connection guard first, then the gRPC metrics.
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
Interceptors(
    std::unique_ptr<chunkd::service::ConnectionGuard> guard,
    std::unique_ptr<chunkd::service::GrpcMetricsInterceptorFactory> metrics) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::move(guard));
  interceptors.push_back(std::move(metrics));
  return interceptors;
}

// Dedup needs the index, Chunk does not: the index's reachability has a
// health status of its own (set by the returned callback), probed off the
// serving threads.
chunkd::service::IndexHealthMonitor::Callback ReportIndexHealth(
    grpc::HealthCheckServiceInterface* health) {
  return [health](const absl::Status& status) {
    health->SetServingStatus(chunkd::service::kDedupHealthService, status.ok());
    if (status.ok()) {
      std::fprintf(stderr, "chunkd: index serving; %s SERVING\n",
                   chunkd::service::kDedupHealthService);
    } else if (absl::IsResourceExhausted(status)) {
      std::fprintf(stderr,
                   "chunkd: %s; %s NOT_SERVING until the index has room "
                   "(Chunk, FindMissing, Release and Dedup of indexed "
                   "chunks keep working)\n",
                   std::string(status.message()).c_str(),
                   chunkd::service::kDedupHealthService);
    } else {
      std::fprintf(stderr,
                   "chunkd: %s; %s NOT_SERVING until the index is back "
                   "(Chunk keeps serving)\n",
                   std::string(status.message()).c_str(),
                   chunkd::service::kDedupHealthService);
    }
  };
}

// Each algorithm's stage-1 kernel on the pool's thread count, every stream's:
// `forced`, or with auto (nullptr) the calibration's choice, made here while
// the pool is idle (chunking/auto_kernel.h; bounded by
// kCalibrationTotalBudget) and logged. Exported as
// chunkd_chunking_backend_info.
void ChooseChunkingKernels(const chunkd::chunking::kernels::Kernel* forced,
                           chunkd::pipeline::WorkerPool& pool,
                           chunkd::metrics::Metrics& metrics) {
  const std::vector<chunkd::chunking::Algorithm>& algorithms =
      chunkd::chunking::AllAlgorithms();
  if (forced != nullptr) {
    for (chunkd::chunking::Algorithm algorithm : algorithms) {
      metrics.SetChunkingBackend(chunkd::chunking::AlgorithmName(algorithm),
                                 pool.parallelism(), forced->name);
    }
    return;
  }
  const absl::Time start = absl::Now();
  const std::vector<chunkd::chunking::KernelChoice> choices =
      chunkd::chunking::CalibrateAutoKernels(algorithms, &pool);
  std::fprintf(
      stderr,
      "chunkd: chunking backend auto: calibrated in %lld ms "
      "(budget %lld ms per algorithm, %lld ms in all)\n",
      static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)),
      static_cast<long long>(
          absl::ToInt64Milliseconds(chunkd::chunking::kCalibrationBudget)),
      static_cast<long long>(absl::ToInt64Milliseconds(
          chunkd::chunking::kCalibrationTotalBudget)));
  for (const chunkd::chunking::KernelChoice& choice : choices) {
    std::fprintf(stderr, "chunkd:   %s\n",
                 chunkd::chunking::DescribeChoice(choice).c_str());
    metrics.SetChunkingBackend(
        chunkd::chunking::AlgorithmName(choice.algorithm), choice.threads,
        choice.kernel->name);
  }
}

// The start-up line: where chunkd serves, and with what.
void LogServing(const std::string& listen, int port, bool tokens,
                const std::string& metrics_listen,
                absl::string_view index_backend, size_t threads,
                const Backends& backends) {
  std::fprintf(
      stderr,
      "chunkd %s serving on %s%s%s (metrics on %s, index %s, %zu "
      "threads, chunking backend %s, sha256 %s, content key %s)\n",
      CHUNKD_VERSION,
      // The port gRPC bound (it picks one for port 0).
      absl::StrCat(listen.substr(0, listen.rfind(':') + 1), port).c_str(),
      absl::GetFlag(FLAGS_tls_cert).empty()
          ? ""
          : (absl::GetFlag(FLAGS_tls_client_ca).empty() ? " with TLS"
                                                        : " with mutual TLS"),
      tokens ? ", bearer tokens required" : "",
      metrics_listen.empty() ? "off" : metrics_listen.c_str(),
      std::string(index_backend).c_str(), threads, KernelName(backends.kernel),
      backends.sha256->name,
      chunkd::fingerprint::ContentKeyBackendName(backends.content_key));
}

// The start-up line of the limits in force.
void LogLimits(const StreamLimits& limits, bool tokens, uint32_t stream_rate) {
  auto limit = [](uint64_t value) {
    return value == 0 ? std::string("no limit") : absl::StrCat(value);
  };
  std::fprintf(
      stderr,
      "chunkd: limits: %s streams, %s per token, %s per client address, %u "
      "per connection, %s new streams/s per connection, idle streams end "
      "after %s, idle connections after %s\n",
      limit(limits.registry.max_streams).c_str(),
      tokens ? limit(limits.registry.max_streams_per_token).c_str() : "-",
      limit(limits.registry.max_streams_per_ip).c_str(),
      limits.streams_per_connection, limit(stream_rate).c_str(),
      limits.idle_timeout == absl::ZeroDuration()
          ? "never"
          : absl::FormatDuration(limits.idle_timeout).c_str(),
      limits.connection_idle == absl::ZeroDuration()
          ? "never"
          : absl::FormatDuration(limits.connection_idle).c_str());
}

// How long streams cancelled at the end of --shutdown_grace get to end, and
// then how long what the drain does not wait for (health Watch and
// reflection streams) gets before the server cancels it: chunkd exits at
// most --shutdown_grace + 5 s after the signal, plus one Redis command
// timeout when an index probe is under way (docs/operations.md, "Server
// flags"; the chart's terminationGracePeriodSeconds counts on it).
constexpr absl::Duration kAbortWait = absl::Seconds(3);
constexpr absl::Duration kShutdownWait = absl::Seconds(2);

// How long connections that no ChunkService call holds open get to close
// after the GOAWAY: their clients acknowledge its PING within a round trip,
// unless they are stalled; a connection still open after it carries other
// services' streams (health Watch) or a stalled client.
constexpr absl::Duration kSettle = absl::Seconds(1);
// How often the drain looks at the calls and connections left.
constexpr absl::Duration kDrainPoll = absl::Milliseconds(20);

// The first part of the drain, after the GOAWAY: until `deadline`, waits for
// the ChunkService calls under way and for the connections to close. A
// connection closes once its client acknowledged the GOAWAY's PING (then
// gets the final GOAWAY) and its last stream ended; a call that arrives on
// it before that is served like any other, so the server must not be shut
// down earlier, or gRPC would cancel such a call (service/goaway.h). True if
// no ChunkService call is left.
bool WaitForClients(chunkd::service::ChunkServiceImpl& service, int port,
                    absl::Time deadline) {
  const absl::Time settled = absl::Now() + kSettle;
  while (true) {
    const absl::Time now = absl::Now();
    if (!service.WaitForCalls(std::min(deadline, now + kDrainPoll))) {
      if (now >= deadline) return false;
      continue;
    }
    if (now >= deadline || now >= settled ||
        chunkd::service::CountConnections(port) == 0) {
      return true;
    }
    absl::SleepFor(kDrainPoll);
  }
}

// After SIGINT or SIGTERM (docs/design.md, "Threading model"): unhealthy,
// the listener closed and a GOAWAY to every connection at once, so that
// clients send their next calls elsewhere while every call that reaches
// chunkd is still served; running streams and calls get --shutdown_grace
// to finish, streams still running then are cancelled with UNAVAILABLE;
// then the server stops.
void Drain(int sig, chunkd::service::ChunkServiceImpl& service,
           chunkd::index::FingerprintIndex& index,
           chunkd::service::IndexHealthMonitor& index_health,
           chunkd::service::IdleTrimmer& trimmer,
           grpc::HealthCheckServiceInterface* health, grpc::Server& server,
           int port) {
  const absl::Duration grace = absl::GetFlag(FLAGS_shutdown_grace);
  const absl::Time deadline = absl::Now() + grace;
  std::fprintf(stderr, "chunkd: signal %d, draining (%zu streams, grace %s)\n",
               sig, service.active_streams(),
               absl::FormatDuration(grace).c_str());
  // NOT_SERVING for every service name, and no later update: the index
  // monitor, stopped last (a probe under way may wait on Redis), no longer
  // changes it.
  health->Shutdown();
  bool finished = false;
  if (chunkd::service::GoAway(server)) {
    finished = WaitForClients(service, port, deadline);
  } else {
    // No GOAWAY before Shutdown with this gRPC (service/goaway.h): clients
    // keep sending here until then, so new streams are refused at once.
    std::fprintf(stderr,
                 "chunkd: this gRPC cannot send GOAWAY before the end of the "
                 "drain; new streams are refused with UNAVAILABLE meanwhile\n");
    service.BeginShutdown();
    finished = service.WaitForCalls(deadline);
  }
  service.BeginShutdown();
  if (!finished) {
    // Calls waiting for Redis to come back fail now, so that their streams
    // can end.
    index.StopWaiting();
    service.AbortAll(chunkd::WithReason(absl::UnavailableError(
        absl::StrCat("chunkd is shutting down; the stream did not finish "
                     "within the ",
                     absl::FormatDuration(grace),
                     " grace period (--shutdown_grace) and was cancelled")),
        chunkd::ErrorReason::kShuttingDown));
    service.WaitForCalls(absl::Now() + kAbortWait);
  }
  // Unary calls still waiting for Redis end with UNAVAILABLE before the
  // deadline below would cancel them.
  index.StopWaiting();
  server.Shutdown(absl::ToChronoTime(absl::Now() + kShutdownWait));
  server.Wait();
  index_health.Stop();
  trimmer.Stop();
}

// Publishes the health statuses at once after the server started: the
// Dedup one from the index's first probe, `first`, run before the port
// served, then chunkd.v1.ChunkService, so that a client that found the
// latter SERVING finds the former set; then probes the index on.
std::unique_ptr<chunkd::service::IndexHealthMonitor> StartHealth(
    grpc::HealthCheckServiceInterface* health,
    chunkd::index::FingerprintIndex* index, const absl::Status& first) {
  chunkd::service::IndexHealthMonitor::Callback report =
      ReportIndexHealth(health);
  report(first);
  health->SetServingStatus("chunkd.v1.ChunkService", true);
  auto monitor = std::make_unique<chunkd::service::IndexHealthMonitor>(
      index, kIndexHealthInterval, std::move(report));
  monitor->SetReported(first);
  monitor->Start();
  return monitor;
}

// The allocator keeps what a burst freed (ConfigureMalloc); it goes back
// to the OS once streams have stopped.
std::unique_ptr<chunkd::service::IdleTrimmer> StartIdleTrimmer(
    chunkd::service::ChunkServiceImpl& service) {
  auto trimmer = std::make_unique<chunkd::service::IdleTrimmer>(
      chunkd::service::IdleTrimmer::Options{absl::Milliseconds(250),
                                            kIdleTrimDelay},
      [&service] {
        return chunkd::service::StreamActivity{service.active_streams(),
                                               service.streams_started()};
      },
      [&service] {
        // The pooled request buffers first, or their pages stay.
        service.ReleaseIdleBuffers();
        chunkd::service::TrimMalloc();
      });
  trimmer->Start();
  return trimmer;
}

}  // namespace

int main(int argc, char** argv) {
  // First, while this is the only thread (service/allocator.h says why).
  const chunkd::service::MallocSetup malloc_setup =
      chunkd::service::ConfigureMalloc(std::getenv("GLIBC_TUNABLES"));
  ParseFlags(argc, argv);
  const sigset_t signals = BlockStopSignals();

  chunkd::service::MemoryPlan memory;
  auto limits = StreamLimitsFromFlags(malloc_setup, &memory);
  if (!limits.ok()) return Fail(limits.status());
  auto credentials = ServerCredentials();
  if (!credentials.ok()) return Fail(credentials.status());
  auto tokens = LoadTokens();
  if (!tokens.ok()) return Fail(tokens.status());
  const std::string index_spec = absl::GetFlag(FLAGS_index);
  const chunkd::index::IndexOptions index_options =
      IndexOptionsFromFlags(memory);
  std::fprintf(stderr, "chunkd: %s\n", malloc_setup.description.c_str());
  auto index = OpenIndex(index_spec, index_options);
  if (!index.ok()) return Fail(index.status());
  auto backends = BackendsFromFlags();
  if (!backends.ok()) return Fail(backends.status());

  chunkd::metrics::Metrics metrics(CHUNKD_VERSION,
                                   KernelName(backends->kernel));
  AbuseLog abuse_log(metrics);
  const uint32_t stream_rate =
      absl::GetFlag(FLAGS_max_stream_rate_per_connection);
  auto guard = MakeConnectionGuard(stream_rate, metrics, abuse_log.log());
  chunkd::service::ConnectionGuard* const guard_ptr = guard.get();
  InstrumentIndex(*index, metrics, index_options.max_entries);
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  auto grpc_metrics = ServeMetrics(metrics, metrics_listen);
  if (!grpc_metrics.ok()) return Fail(grpc_metrics.status());

  // Declared after metrics, so its tasks finish while the metrics they
  // update still exist.
  const size_t threads = WorkerThreads();
  chunkd::pipeline::WorkerPool pool(threads);
  metrics.WatchQueueDepth([&pool] { return pool.queue_depth(); });
  ChooseChunkingKernels(backends->kernel, pool, metrics);
  chunkd::pipeline::HintCache hint_cache(
      HintCacheEntries(memory.hint_cache_mib));
  chunkd::service::MemoryBudget budget(limits->memory_budget);
  chunkd::service::FairBudget stream_memory(limits->stream_memory);
  metrics.WatchStreamMemory([&stream_memory] {
    chunkd::metrics::StreamMemoryUse use;
    use.waiting_streams = stream_memory.waiting();
    use.waiting_bytes = stream_memory.waiting_bytes();
    use.reserved = stream_memory.used();
    use.limit = stream_memory.limit();
    return use;
  });
  chunkd::service::ChunkServiceImpl service(MakeServiceOptions(
      {index->get(), (*index)->backend() != "memory", &hint_cache, &pool,
       &metrics,
       stream_rate > 0 ? guard_ptr : nullptr, &budget, &stream_memory,
       tokens->get(), backends->kernel},
      *limits));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  grpc::ResourceQuota quota("chunkd");
  ConfigureBuilder(builder, quota, *limits);
  builder.RegisterService(&service);
  builder.experimental().SetInterceptorCreators(
      Interceptors(std::move(guard), *std::move(grpc_metrics)));
  // The index's first probe, before the port serves (docs/operations.md,
  // "Health checking"), so that its status is published with the others.
  const absl::Status index_status = (*index)->Health();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    const std::string why = WhyCannotListen(listen);
    return Fail(absl::StrCat("cannot listen on --listen ", listen,
                             why.empty() ? "" : ": ", why));
  }
  guard_ptr->set_local_port(port);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  const auto index_health = StartHealth(health, index->get(), index_status);
  const auto trimmer = StartIdleTrimmer(service);
  LogServing(listen, port, *tokens != nullptr, metrics_listen,
             (*index)->backend(), threads, *backends);
  LogLimits(*limits, *tokens != nullptr, stream_rate);

  Drain(WaitForSignal(signals, **index), service, **index, *index_health, *trimmer,
        health, *server, port);
  metrics.WatchQueueDepth(nullptr);  // the pool goes first
  metrics.WatchStreamMemory(nullptr);  // and the stream memory
  metrics.WatchIndexEntries(nullptr);
  metrics.WatchIndexWaits(nullptr);
  metrics.WatchIndexStorage(nullptr);
  abuse_log.Stop();
  std::fprintf(stderr, "chunkd: stopped\n");
  return 0;
}
