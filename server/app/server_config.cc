#include "app/server_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chunkd::app {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// --max_message_bytes and --max_inflight_bytes.
absl::Status CheckMessageSizes(const ServerConfig& c) {
  if (c.max_message_bytes < kMinMessageBytes ||
      c.max_message_bytes > kMaxMessageBytes) {
    return Invalid(absl::StrCat("--max_message_bytes ", c.max_message_bytes,
                                " is out of range [", kMinMessageBytes, ", ",
                                kMaxMessageBytes, "]"));
  }
  if (c.max_inflight_bytes < c.max_message_bytes) {
    return Invalid(absl::StrCat("--max_inflight_bytes ", c.max_inflight_bytes,
                                " must be at least --max_message_bytes ",
                                c.max_message_bytes));
  }
  return absl::OkStatus();
}

// The memory flags as given (the memory plan sizes the others, and checks
// the sums once it has).
absl::Status CheckMemoryFlags(const ServerConfig& c) {
  if (c.max_streams.has_value() && *c.max_streams == 0) {
    return Invalid("--max_streams must be at least 1");
  }
  if (c.index_max_entries.has_value() && *c.index_max_entries < -1) {
    return Invalid(absl::StrCat(
        "--index_max_entries ", *c.index_max_entries,
        " must be -1 (sized to --memory_budget or the memory limit), 0 (no "
        "limit) or a count"));
  }
  if (c.estimate_max_entries.has_value() && *c.estimate_max_entries < -1) {
    return Invalid(absl::StrCat(
        "--estimate_max_entries ", *c.estimate_max_entries,
        " must be -1 (sized to the largest stream's memory), 0 (no limit) "
        "or a count"));
  }
  if (c.max_streams.has_value() && c.memory_budget.has_value() &&
      *c.memory_budget < uint64_t{*c.max_streams} * c.max_message_bytes) {
    return Invalid(absl::StrCat(
        "--memory_budget ", *c.memory_budget,
        " must be at least --max_streams (", *c.max_streams,
        ") x --max_message_bytes (", c.max_message_bytes,
        "), so that an idle stream never blocks the others"));
  }
  return absl::OkStatus();
}

// The per-token, per-connection and idle limits.
absl::Status CheckStreamLimits(const ServerConfig& c) {
  if (c.max_streams_per_token < -1) {
    return Invalid(absl::StrCat("--max_streams_per_token ",
                                c.max_streams_per_token,
                                " must be -1 (a quarter of --max_streams), 0 "
                                "(no limit) or a count"));
  }
  if (c.max_streams_per_connection == 0) {
    return Invalid("--max_streams_per_connection must be at least 1");
  }
  if (c.stream_idle_timeout < absl::ZeroDuration() ||
      c.max_connection_idle < absl::ZeroDuration()) {
    return Invalid(
        "--stream_idle_timeout and --max_connection_idle must not be "
        "negative");
  }
  if (c.shutdown_grace < absl::ZeroDuration()) {
    return Invalid(absl::StrCat("--shutdown_grace ",
                                absl::FormatDuration(c.shutdown_grace),
                                " must not be negative"));
  }
  return absl::OkStatus();
}

// --tls_cert, --tls_key and --tls_client_ca: which go together.
absl::Status CheckTls(const ServerConfig& c) {
  if (c.tls_cert.empty() && c.tls_key.empty()) {
    if (!c.tls_client_ca.empty()) {
      return Invalid("--tls_client_ca needs --tls_cert and --tls_key");
    }
    return absl::OkStatus();
  }
  if (c.tls_cert.empty() || c.tls_key.empty()) {
    return Invalid("TLS needs both --tls_cert and --tls_key");
  }
  return absl::OkStatus();
}

// --index: a scheme some backend serves (the rest of the spec is the
// backend's to check when it opens: index/fingerprint_index.h, CreateIndex).
absl::Status CheckIndexSpec(const ServerConfig& c) {
  return index::PlacementOfSpec(c.index).status();
}

}  // namespace

absl::Status CheckServerConfig(const ServerConfig& config) {
  for (absl::Status (*check)(const ServerConfig&) :
       {CheckMessageSizes, CheckMemoryFlags, CheckStreamLimits, CheckTls,
        CheckIndexSpec}) {
    if (absl::Status status = check(config); !status.ok()) return status;
  }
  return absl::OkStatus();
}

index::IndexPlacement IndexPlacementOf(const ServerConfig& config) {
  return index::PlacementOfSpec(config.index).value_or(index::IndexPlacement());
}

size_t WorkerThreads(const ServerConfig& config, size_t cores) {
  return config.threads != 0 ? config.threads : std::max<size_t>(1, cores);
}

service::MemoryInputs MemoryInputsOf(const ServerConfig& config,
                                     size_t cores) {
  service::MemoryInputs inputs;
  inputs.max_streams = config.max_streams;
  inputs.memory_budget = config.memory_budget;
  inputs.index_max_entries = config.index_max_entries;
  inputs.estimate_max_entries = config.estimate_max_entries;
  inputs.hint_cache_mib = config.hint_cache_mib;
  // 0, given or not, means sized.
  inputs.stream_memory = config.stream_memory_budget;
  if (inputs.stream_memory == uint64_t{0}) inputs.stream_memory.reset();
  inputs.max_message_bytes = config.max_message_bytes;
  inputs.max_inflight_bytes = config.max_inflight_bytes;
  inputs.threads = WorkerThreads(config, cores);
  inputs.cores = std::max<size_t>(1, cores);
  const index::IndexPlacement placement = IndexPlacementOf(config);
  inputs.memory_index = placement.in_process_memory;
  inputs.rocksdb_index = placement.block_cache;
  inputs.index_cache_mib = config.index_cache_mib;
  return inputs;
}

StreamLimits StreamLimitsOf(const ServerConfig& config,
                            const service::MemoryPlan& memory) {
  StreamLimits limits;
  limits.max_message = config.max_message_bytes;
  limits.max_inflight = config.max_inflight_bytes;
  limits.memory_budget = memory.memory_budget;
  limits.stream_memory = memory.stream_memory;
  limits.estimate_max_entries = memory.estimate_max_entries;
  limits.registry.max_streams = memory.max_streams;
  limits.registry.max_streams_per_ip = config.max_streams_per_ip;
  limits.registry.max_streams_per_token =
      config.max_streams_per_token == -1
          ? std::max<size_t>(1, memory.max_streams / 4)
          : static_cast<size_t>(config.max_streams_per_token);
  limits.streams_per_connection = config.max_streams_per_connection;
  // Also counted by chunkd: HTTP/2 resets let a client open streams past
  // the SETTINGS limit, and a reset stream lives until chunkd ends it. Twice
  // the SETTINGS limit, so that a client that cancels calls and at once
  // opens new ones (its HTTP/2 stack has forgotten the reset streams; chunkd
  // may not have ended them yet) is not refused, while a rapid reset still
  // holds at most that many.
  limits.registry.max_streams_per_connection =
      2 * size_t{config.max_streams_per_connection};
  limits.stream_rate = config.max_stream_rate_per_connection;
  limits.idle_timeout = config.stream_idle_timeout;
  limits.connection_idle = config.max_connection_idle;
  return limits;
}

}  // namespace chunkd::app
