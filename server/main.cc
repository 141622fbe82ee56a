// chunkd: the chunking and deduplication server. The flags, read into a
// ServerConfig (app/server_config.h) and checked; the server is assembled
// from it and run by app/server_assembly.h.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

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
#include "app/server_assembly.h"
#include "app/server_config.h"
#include "app/shutdown.h"
#include "grpcpp/grpcpp.h"
#include "service/allocator.h"
#include "service/memory_plan.h"

// Each flag's default is ServerConfig's (app/server_config.h; for the memory
// flags the plan sizes, the plan's without a limit), written out here so that
// --help prints it: app/server_config_test.cc holds the three equal, and
// docs/operations.md's table with them.
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
          "Chunk, Dedup and Estimate streams served at once; one more is "
          "refused with RESOURCE_EXHAUSTED. Left unset under a memory "
          "limit: as many streams of typical parameters (Dedup, fastcdc's "
          "default sizes) as fit it (at most the default)");
ABSL_FLAG(int64_t, max_streams_per_token, -1,
          "with --auth_tokens, Chunk, Dedup and Estimate streams one bearer "
          "token may run at once (one more is refused with "
          "RESOURCE_EXHAUSTED); -1 means a quarter of --max_streams, 0 no "
          "limit");
ABSL_FLAG(uint32_t, max_streams_per_ip, 0,
          "Chunk, Dedup and Estimate streams one client IP address may run "
          "at once; 0 (the default) means no limit, as behind a proxy every "
          "client may share one address");
ABSL_FLAG(uint32_t, max_streams_per_connection, 32,
          "HTTP/2 streams (calls of any kind) one connection may have open, "
          "advertised as SETTINGS_MAX_CONCURRENT_STREAMS; chunkd also "
          "refuses a connection's Chunk, Dedup and Estimate streams past it, "
          "counting the streams it reset until chunkd has ended them");
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
ABSL_FLAG(int64_t, estimate_max_entries, -1,
          "distinct chunks one Estimate stream may keep over all its sets "
          "(at most about 168 bytes each with SHA-256, 114 with XXH128); an "
          "exact estimate past it ends with RESOURCE_EXHAUSTED (reason "
          "STREAM_MEMORY) suggesting a sample_rate. The stream reserves "
          "them in --stream_memory_budget. -1 means sized: what half of the "
          "largest Chunk or Dedup stream's memory holds at 168 bytes each; "
          "0 no limit");
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

// Start-up stops: the message, and exit status 2.
int Fail(const absl::Status& status) {
  std::fprintf(stderr, "chunkd: %s\n", std::string(status.message()).c_str());
  return 2;
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

// The flag's value when given on the command line or in a flagfile;
// nullopt when left at its default.
template <typename T>
std::optional<T> GivenFlag(const absl::Flag<T>& flag, absl::string_view name) {
  if (!absl::flags_internal::WasPresentOnCommandLine(name)) return std::nullopt;
  return absl::GetFlag(flag);
}

// The flags as parsed, unchecked.
chunkd::app::ServerConfig ConfigFromFlags() {
  chunkd::app::ServerConfig c;
  c.listen = absl::GetFlag(FLAGS_listen);
  c.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  c.index = absl::GetFlag(FLAGS_index);
  c.redis_password_file = absl::GetFlag(FLAGS_redis_password_file);
  c.redis_pool_size = absl::GetFlag(FLAGS_redis_pool_size);
  c.redis_connect_timeout = absl::GetFlag(FLAGS_redis_connect_timeout);
  c.redis_command_timeout = absl::GetFlag(FLAGS_redis_command_timeout);
  c.redis_failover_wait = absl::GetFlag(FLAGS_redis_failover_wait);
  c.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  c.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_bytes);
  c.threads = absl::GetFlag(FLAGS_threads);
  c.backend = absl::GetFlag(FLAGS_backend);
  c.max_streams = GivenFlag(FLAGS_max_streams, "max_streams");
  c.memory_budget = GivenFlag(FLAGS_memory_budget, "memory_budget");
  c.stream_memory_budget =
      GivenFlag(FLAGS_stream_memory_budget, "stream_memory_budget");
  c.index_max_entries = GivenFlag(FLAGS_index_max_entries, "index_max_entries");
  c.estimate_max_entries =
      GivenFlag(FLAGS_estimate_max_entries, "estimate_max_entries");
  c.index_cache_mib = GivenFlag(FLAGS_index_cache_mib, "index_cache_mib");
  c.hint_cache_mib = GivenFlag(FLAGS_hint_cache_mib, "hint_cache_mib");
  c.memory_limit_file = absl::GetFlag(FLAGS_memory_limit_file);
  c.max_streams_per_token = absl::GetFlag(FLAGS_max_streams_per_token);
  c.max_streams_per_ip = absl::GetFlag(FLAGS_max_streams_per_ip);
  c.max_streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  c.max_stream_rate_per_connection =
      absl::GetFlag(FLAGS_max_stream_rate_per_connection);
  c.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  c.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  c.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  c.tls_key = absl::GetFlag(FLAGS_tls_key);
  c.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  c.auth_tokens = absl::GetFlag(FLAGS_auth_tokens);
  c.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  // First, while this is the only thread (service/allocator.h says why).
  const chunkd::service::MallocSetup malloc_setup =
      chunkd::service::ConfigureMalloc(std::getenv("GLIBC_TUNABLES"));
  ParseFlags(argc, argv);
  const sigset_t signals = chunkd::app::BlockStopSignals();
  const chunkd::app::ServerConfig config = ConfigFromFlags();
  if (absl::Status s = chunkd::app::CheckServerConfig(config); !s.ok()) {
    return Fail(s);
  }
  if (absl::Status s = chunkd::app::RunServer(config, malloc_setup, signals);
      !s.ok()) {
    return Fail(s);
  }
  std::fprintf(stderr, "chunkd: stopped\n");
  return 0;
}
