// The parts chunkd is assembled from, each made from a checked ServerConfig
// (app/server_config.h): the memory plan, TLS credentials, bearer tokens,
// the index, the chunking and hashing backends, and what the server logs
// about them at start. app/server_assembly.h puts them together.
//
// Called from main's thread during start-up. Errors name the flag (or
// environment variable) and the problem.
#ifndef CHUNKD_APP_START_UP_H_
#define CHUNKD_APP_START_UP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "app/server_config.h"
#include "chunking/kernels/kernels.h"
#include "fingerprint/content_key.h"
#include "fingerprint/sha256_mb.h"
#include "grpcpp/security/server_credentials.h"
#include "index/fingerprint_index.h"
#include "metrics/metrics.h"
#include "pipeline/worker_pool.h"
#include "service/allocator.h"
#include "service/auth.h"
#include "service/memory_plan.h"

namespace chunkd::app {

// The memory limit (--memory_limit_file, else the cgroup's) and the memory
// flags sized to it (service/memory_plan.h), logged; malloc's arenas cut
// to the plan's (still the only thread). REQUIRES: CheckServerConfig OK.
absl::StatusOr<service::MemoryPlan> PlanMemory(
    const ServerConfig& config, const service::MallocSetup& malloc_setup);

// Insecure, TLS or mutual TLS, the files read now.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerConfig& config);

// --auth_tokens, read now; nullptr when unset.
absl::StatusOr<std::unique_ptr<service::TokenTable>> LoadTokens(
    const ServerConfig& config);

// The --redis_* flags, and the entry limit and cache as planned.
index::IndexOptions IndexOptionsOf(const ServerConfig& config,
                                   const service::MemoryPlan& memory);

// The index --index names, opened; the log says which.
absl::StatusOr<std::unique_ptr<index::FingerprintIndex>> OpenIndex(
    const ServerConfig& config, const index::IndexOptions& options);

// Counts and times the index's calls; a memory or rocksdb index's entries,
// a rocksdb index's storage, or a Redis index's waits for Redis, are
// exported too.
void InstrumentIndex(std::unique_ptr<index::FingerprintIndex>& index,
                     metrics::Metrics& metrics, uint64_t max_entries);

// The chunking kernel (--backend; nullptr: auto), and how fingerprints and
// content keys are computed.
struct Backends {
  const chunking::kernels::KernelSet* kernel = nullptr;
  const fingerprint::Sha256Impl* sha256 = nullptr;
  fingerprint::ContentKeyImpl content_key =
      fingerprint::ContentKeyImpl::kOpenSsl;
};

// --backend, else $CHUNKD_BACKEND; $CHUNKD_SHA256; $CHUNKD_CONTENT_KEY. A
// bad value stops chunkd here rather than at the first chunk.
absl::StatusOr<Backends> ChooseBackends(const ServerConfig& config);

// The chunking backend's name: the forced kernel's, or "auto".
const char* KernelName(const chunking::kernels::KernelSet* kernel);

// Each algorithm's stage-1 kernel on the pool's thread count, every stream's:
// `forced`, or with auto (nullptr) the calibration's choice, made here while
// the pool is idle (chunking/auto_kernel.h; bounded by
// kCalibrationTotalBudget) and logged. Exported as
// chunkd_chunking_backend_info.
void ChooseChunkingKernels(const chunking::kernels::KernelSet* forced,
                           pipeline::WorkerPool& pool,
                           metrics::Metrics& metrics);

// The start-up line: where chunkd serves (`port`, the port gRPC bound), and
// with what.
void LogServing(const ServerConfig& config, int port, bool tokens,
                absl::string_view index_backend, size_t threads,
                const Backends& backends);

// The start-up line of the limits in force.
void LogLimits(const StreamLimits& limits, bool tokens);

// Why `listen` ("host:port") cannot be bound now, by trying it; empty when
// it can (gRPC failed for another reason).
std::string WhyCannotListen(const std::string& listen);

}  // namespace chunkd::app

#endif  // CHUNKD_APP_START_UP_H_
