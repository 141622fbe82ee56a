#include "app/start_up.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chunkd/chunker.h"
#include "chunking/auto_kernel.h"
#include "grpcpp/grpcpp.h"
#include "service/instrumented_index.h"
#include "service/memory_limit.h"
#include "service/tls_files.h"

namespace chunkd::app {
namespace {

// The cores of this machine, at least 1.
size_t Cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// The plan and where its limit came from, for the start-up log.
void LogPlan(const service::MemoryLimit& limit,
             const service::MemoryPlan& plan) {
  if (limit.bytes.has_value()) {
    std::fprintf(stderr,
                 "chunkd: memory limit %llu bytes (%s); sized to %.0f %% of "
                 "it: %s\n",
                 static_cast<unsigned long long>(*limit.bytes),
                 limit.source.c_str(), service::kLimitShare * 100,
                 plan.summary.c_str());
  } else {
    std::fprintf(stderr, "chunkd: no memory limit (%s): %s\n",
                 limit.source.c_str(), plan.summary.c_str());
  }
  for (const std::string& warning : plan.warnings) {
    std::fprintf(stderr, "chunkd: warning: %s\n", warning.c_str());
  }
}

}  // namespace

absl::StatusOr<service::MemoryPlan> PlanMemory(
    const ServerConfig& config, const service::MallocSetup& malloc_setup) {
  absl::StatusOr<service::MemoryLimit> limit =
      config.memory_limit_file.empty()
          ? service::ReadCgroupMemoryLimit()
          : service::ReadMemoryLimitFile(config.memory_limit_file);
  if (!limit.ok()) return limit.status();
  service::MemoryInputs inputs = MemoryInputsOf(config, Cores());
  inputs.limit = limit->bytes;
  inputs.arenas = malloc_setup.configured ? malloc_setup.arena_max : 0;
  absl::StatusOr<service::MemoryPlan> plan = service::PlanMemory(inputs);
  if (!plan.ok()) return plan.status();
#if defined(__GLIBC__)
  // Fewer arenas under a limit; still the only thread (ConfigureMalloc).
  if (plan->arenas != 0 && plan->arenas != malloc_setup.arena_max) {
    mallopt(M_ARENA_MAX, static_cast<int>(plan->arenas));
  }
#endif
  LogPlan(*limit, *plan);
  return plan;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerConfig& config) {
  if (config.tls_cert.empty() && config.tls_key.empty()) {
    return grpc::InsecureServerCredentials();
  }
  auto files = service::LoadTlsFiles(config.tls_cert, config.tls_key,
                                     config.tls_client_ca);
  if (!files.ok()) return files.status();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = std::move(files->cert_chain);
  pair.private_key = std::move(files->private_key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!config.tls_client_ca.empty()) {
    options.pem_root_certs = std::move(files->client_ca);
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::unique_ptr<service::TokenTable>> LoadTokens(
    const ServerConfig& config) {
  if (config.auth_tokens.empty()) {
    return std::unique_ptr<service::TokenTable>();
  }
  auto table = service::TokenTable::Load(config.auth_tokens);
  if (!table.ok()) return table.status();
  return std::make_unique<service::TokenTable>(*std::move(table));
}

index::IndexOptions IndexOptionsOf(const ServerConfig& config,
                                   const service::MemoryPlan& memory) {
  index::IndexOptions options;
  options.redis_password_file = config.redis_password_file;
  options.pool_size = config.redis_pool_size;
  options.connect_timeout = config.redis_connect_timeout;
  options.command_timeout = config.redis_command_timeout;
  options.failover_wait = config.redis_failover_wait;
  // A call waiting for Redis lends the worker pool a thread meanwhile.
  options.on_wait = pipeline::WorkerPool::Blocking;
  options.max_entries = memory.index_max_entries;
  options.cache_bytes = memory.index_cache_mib << 20;
  options.warn = [](const std::string& warning) {
    std::fprintf(stderr, "chunkd: %s\n", warning.c_str());
  };
  return options;
}

absl::StatusOr<std::unique_ptr<index::FingerprintIndex>> OpenIndex(
    const ServerConfig& config, const index::IndexOptions& options) {
  auto index = index::CreateIndex(config.index, options);
  if (!index.ok()) return index.status();
  const index::IndexPlacement placement = IndexPlacementOf(config);
  std::string detail;
  if (placement.embedded) {
    detail = options.max_entries == 0
                 ? ", no entry limit"
                 : absl::StrCat(", at most ", options.max_entries,
                                " entries (--index_max_entries)");
  }
  if (placement.block_cache) {
    absl::StrAppend(&detail, "; ", (*index)->EntryCount().value_or(0),
                    " entries kept from before, block cache ",
                    options.cache_bytes >> 20, " MiB");
  }
  std::fprintf(stderr, "chunkd: index %s%s\n",
               index::RedactIndexSpec(config.index).c_str(), detail.c_str());
  return index;
}

void InstrumentIndex(std::unique_ptr<index::FingerprintIndex>& index,
                     metrics::Metrics& metrics, uint64_t max_entries) {
  index = std::make_unique<service::InstrumentedIndex>(std::move(index),
                                                       &metrics);
  if (index->FailoverWaits().has_value()) {
    metrics.WatchIndexWaits(
        [index = index.get()]() -> std::optional<metrics::IndexWaits> {
          const auto c = index->FailoverWaits();
          if (!c.has_value()) return std::nullopt;
          return metrics::IndexWaits{c->waiting, c->recovered, c->expired};
        });
  }
  if (index->Storage().has_value()) {
    metrics.WatchIndexStorage(
        [index = index.get()]() -> std::optional<metrics::IndexStorage> {
          const auto s = index->Storage();
          if (!s.has_value()) return std::nullopt;
          return metrics::IndexStorage{
              s->disk_bytes,   s->pending_compaction_bytes,
              s->running_compactions, s->stall_micros, s->cache_hits,
              s->cache_misses, s->cache_bytes, s->cache_capacity};
        });
  }
  if (!index->EntryCount().has_value()) return;
  if (max_entries != 0) metrics.SetIndexMaxEntries(max_entries);
  metrics.WatchIndexEntries(
      [index = index.get()] { return index->EntryCount(); });
}

absl::StatusOr<Backends> ChooseBackends(const ServerConfig& config) {
  Backends backends;
  absl::StatusOr<const chunking::kernels::KernelSet*> kernel =
      config.backend.empty() ? chunking::kernels::ForcedKernelSet()
                             : chunking::kernels::FindKernelSet(config.backend);
  if (!kernel.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.backend.empty() ? "CHUNKD_BACKEND: " : "--backend: ",
        kernel.status().message()));
  }
  backends.kernel = *kernel;
  // How sha256 fingerprints are computed ($CHUNKD_SHA256 or the best the CPU
  // runs).
  absl::StatusOr<const fingerprint::Sha256Impl*> sha256 =
      fingerprint::DefaultSha256Impl();
  if (!sha256.ok()) return sha256.status();
  backends.sha256 = *sha256;
  // How the hint cache keys contents ($CHUNKD_CONTENT_KEY or the best the
  // CPU runs).
  absl::StatusOr<fingerprint::ContentKeyImpl> content_key =
      fingerprint::DefaultContentKeyImpl();
  if (!content_key.ok()) return content_key.status();
  backends.content_key = *content_key;
  return backends;
}

const char* KernelName(const chunking::kernels::KernelSet* kernel) {
  return kernel == nullptr ? "auto" : kernel->name;
}

void ChooseChunkingKernels(const chunking::kernels::KernelSet* forced,
                           pipeline::WorkerPool& pool,
                           metrics::Metrics& metrics) {
  const std::vector<chunking::Algorithm>& algorithms =
      chunking::AllAlgorithms();
  if (forced != nullptr) {
    for (chunking::Algorithm algorithm : algorithms) {
      metrics.SetChunkingBackend(chunking::AlgorithmName(algorithm),
                                 pool.parallelism(), forced->name);
    }
    return;
  }
  const absl::Time start = absl::Now();
  const std::vector<chunking::KernelChoice> choices =
      chunking::CalibrateAutoKernels(algorithms, &pool);
  std::fprintf(
      stderr,
      "chunkd: chunking backend auto: calibrated in %lld ms "
      "(budget %lld ms per algorithm, %lld ms in all)\n",
      static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - start)),
      static_cast<long long>(
          absl::ToInt64Milliseconds(chunking::kCalibrationBudget)),
      static_cast<long long>(
          absl::ToInt64Milliseconds(chunking::kCalibrationTotalBudget)));
  for (const chunking::KernelChoice& choice : choices) {
    std::fprintf(stderr, "chunkd:   %s\n",
                 chunking::DescribeChoice(choice).c_str());
    metrics.SetChunkingBackend(chunking::AlgorithmName(choice.algorithm),
                               choice.threads, choice.kernel->name);
  }
}

void LogServing(const ServerConfig& config, int port, bool tokens,
                absl::string_view index_backend, size_t threads,
                const Backends& backends) {
  const std::string& listen = config.listen;
  const char* const tls = config.tls_cert.empty() ? ""
                          : config.tls_client_ca.empty() ? " with TLS"
                                                         : " with mutual TLS";
  std::fprintf(
      stderr,
      "chunkd %s serving on %s%s%s (metrics on %s, index %s, %zu "
      "threads, chunking backend %s, sha256 %s, content key %s)\n",
      CHUNKD_VERSION,
      // The port gRPC bound (it picks one for port 0).
      absl::StrCat(listen.substr(0, listen.rfind(':') + 1), port).c_str(),
      tls, tokens ? ", bearer tokens required" : "",
      config.metrics_listen.empty() ? "off" : config.metrics_listen.c_str(),
      std::string(index_backend).c_str(), threads, KernelName(backends.kernel),
      backends.sha256->name,
      fingerprint::ContentKeyImplName(backends.content_key));
}

void LogLimits(const StreamLimits& limits, bool tokens) {
  auto limit = [](uint64_t value) {
    return value == 0 ? std::string("no limit") : absl::StrCat(value);
  };
  auto after = [](absl::Duration d) {
    return d == absl::ZeroDuration() ? std::string("never")
                                     : absl::FormatDuration(d);
  };
  std::fprintf(
      stderr,
      "chunkd: limits: %s streams, %s per token, %s per client address, %u "
      "per connection, %s new streams/s per connection, idle streams end "
      "after %s, idle connections after %s\n",
      limit(limits.registry.max_streams).c_str(),
      tokens ? limit(limits.registry.max_streams_per_token).c_str() : "-",
      limit(limits.registry.max_streams_per_ip).c_str(),
      limits.streams_per_connection, limit(limits.stream_rate).c_str(),
      after(limits.idle_timeout).c_str(),
      after(limits.connection_idle).c_str());
}

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

}  // namespace chunkd::app
