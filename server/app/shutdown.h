// How chunkd waits for its stop signal and drains on it (docs/design.md,
// "Threading model"; docs/operations.md, "Shutting down").
//
// Called from main's thread only: BlockStopSignals before any other thread
// starts, WaitForSignal and Drain once the server serves.
#ifndef CHUNKD_APP_SHUTDOWN_H_
#define CHUNKD_APP_SHUTDOWN_H_

#include <signal.h>

#include "absl/time/time.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server.h"
#include "index/fingerprint_index.h"
#include "service/chunk_service.h"
#include "service/index_health.h"
#include "service/allocator.h"

namespace chunkd::app {

// Blocks SIGINT, SIGTERM and SIGUSR1 in the calling thread; every thread
// started from here on inherits that, so only WaitForSignal sees them.
sigset_t BlockStopSignals();

// Waits for SIGINT or SIGTERM among `signals` and returns it; meanwhile
// each SIGUSR1 writes a checkpoint of `index` (an embedded database's),
// logged.
int WaitForSignal(const sigset_t& signals, index::FingerprintIndex& index);

// What a drain stops, each owned by the caller.
struct DrainParts {
  service::ChunkServiceImpl* service = nullptr;
  index::FingerprintIndex* index = nullptr;
  service::IndexHealthMonitor* index_health = nullptr;
  service::IdleTrimmer* trimmer = nullptr;
  grpc::HealthCheckServiceInterface* health = nullptr;
  grpc::Server* server = nullptr;
  int port = 0;  // the port the server bound
};

// After signal `sig`: unhealthy, the listener closed and a GOAWAY to every
// connection at once, so that clients send their next calls elsewhere while
// every call that reaches chunkd is still served; running streams and calls
// get `grace` (--shutdown_grace) to finish, streams still running then are
// cancelled with UNAVAILABLE; then the server, the health monitor and the
// trimmer stop.
void Drain(int sig, absl::Duration grace, const DrainParts& parts);

}  // namespace chunkd::app

#endif  // CHUNKD_APP_SHUTDOWN_H_
