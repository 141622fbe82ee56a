// chunkd's settings as one plain value: what the command-line flags say
// (server/main.cc reads them into it), checked on its own before anything
// starts, and the limits derived from it. docs/operations.md, "Server flags",
// gives each flag's meaning and default; the defaults below are those.
//
// A value type: copyable, no I/O, no locks. CheckServerConfig reads no file
// and touches no network; what depends on the machine (the memory limit, the
// CPU's kernels, the TLS files' contents, the index itself) is checked when
// the server is assembled from the value (app/server_assembly.h).
#ifndef CHUNKD_APP_SERVER_CONFIG_H_
#define CHUNKD_APP_SERVER_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"
#include "service/memory_plan.h"
#include "service/stream_registry.h"

namespace chunkd::app {

// Bounds of --max_message_bytes.
inline constexpr uint64_t kMinMessageBytes = 1024;
inline constexpr uint64_t kMaxMessageBytes = uint64_t{256} << 20;

struct ServerConfig {
  // --listen, --metrics_listen (empty: no /metrics).
  std::string listen = "127.0.0.1:50051";
  std::string metrics_listen = "127.0.0.1:9464";

  // --index and the --redis_* flags (the spec's query overrides the latter;
  // the index checks them: index/redis_config.h).
  std::string index = "memory";
  std::string redis_password_file;
  int redis_pool_size = 16;
  absl::Duration redis_connect_timeout = absl::Seconds(1);
  absl::Duration redis_command_timeout = absl::Seconds(2);
  absl::Duration redis_failover_wait = absl::Seconds(30);

  // --max_message_bytes (kMinMessageBytes..kMaxMessageBytes) and
  // --max_inflight_bytes (at least the former).
  uint64_t max_message_bytes = uint64_t{4} << 20;
  uint64_t max_inflight_bytes = uint64_t{16} << 20;
  // --threads; 0: one per core.
  uint32_t threads = 0;
  // --backend; empty: $CHUNKD_BACKEND, else auto.
  std::string backend;

  // The memory flags the plan sizes when they are left unset
  // (service/memory_plan.h); nullopt: not given. Without a memory limit the
  // plan's defaults are service::kDefaultMaxStreams, kDefaultMemoryBudget,
  // kDefaultHintCacheMib and kDefaultIndexCacheMib; index_max_entries -1,
  // estimate_max_entries -1 and stream_memory_budget 0, given or not, mean
  // sized.
  std::optional<uint32_t> max_streams;
  std::optional<uint64_t> memory_budget;
  std::optional<uint64_t> stream_memory_budget;
  std::optional<int64_t> index_max_entries;
  std::optional<int64_t> estimate_max_entries;
  std::optional<uint64_t> index_cache_mib;
  std::optional<uint64_t> hint_cache_mib;
  // --memory_limit_file; empty: the cgroup's limit.
  std::string memory_limit_file;

  // --max_streams_per_token: -1 a quarter of the streams, 0 no limit.
  int64_t max_streams_per_token = -1;
  // --max_streams_per_ip: 0 no limit.
  uint32_t max_streams_per_ip = 0;
  // --max_streams_per_connection: at least 1.
  uint32_t max_streams_per_connection = 32;
  // --max_stream_rate_per_connection: 0 off.
  uint32_t max_stream_rate_per_connection = 1000;
  // --stream_idle_timeout and --max_connection_idle: 0 off, never negative.
  absl::Duration stream_idle_timeout = absl::Seconds(60);
  absl::Duration max_connection_idle = absl::Minutes(5);

  // --tls_cert and --tls_key (both or neither), --tls_client_ca (needs
  // them), --auth_tokens; empty: off.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string auth_tokens;

  // --shutdown_grace: never negative.
  absl::Duration shutdown_grace = absl::Seconds(30);
};

// OK when `config` can be served, as far as its values alone tell; else
// INVALID_ARGUMENT with a message that names the flag and the problem (the
// first problem found).
absl::Status CheckServerConfig(const ServerConfig& config);

// Where the index `config.index` names keeps its entries (all false, the
// backend empty, for a spec CheckServerConfig refuses).
index::IndexPlacement IndexPlacementOf(const ServerConfig& config);

// The worker threads: --threads, or one per core (`cores`) for 0.
size_t WorkerThreads(const ServerConfig& config, size_t cores);

// The memory plan's inputs from `config`; the caller adds the limit, the
// cores and the arenas. REQUIRES: CheckServerConfig(config) is OK.
service::MemoryInputs MemoryInputsOf(const ServerConfig& config,
                                     size_t cores);

// What bounds the streams and connections: `config` with the memory flags
// as planned.
struct StreamLimits {
  uint64_t max_message = 0;
  uint64_t max_inflight = 0;
  uint64_t memory_budget = 0;
  uint64_t stream_memory = 0;
  uint64_t estimate_max_entries = 0;  // 0: no limit
  service::RegistryLimits registry;
  uint32_t streams_per_connection = 0;
  uint32_t stream_rate = 0;  // new streams/s per connection; 0: no limit
  absl::Duration idle_timeout;
  absl::Duration connection_idle;
};

// REQUIRES: CheckServerConfig(config) is OK.
StreamLimits StreamLimitsOf(const ServerConfig& config,
                            const service::MemoryPlan& memory);

}  // namespace chunkd::app

#endif  // CHUNKD_APP_SERVER_CONFIG_H_
