// chunkd assembled from a checked ServerConfig (app/server_config.h): the
// index, metrics, worker pool, budgets, service and gRPC server, served
// until SIGINT or SIGTERM and drained (app/shutdown.h). server/main.cc
// reads the flags, checks them and calls RunServer.
#ifndef CHUNKD_APP_SERVER_ASSEMBLY_H_
#define CHUNKD_APP_SERVER_ASSEMBLY_H_

#include <signal.h>

#include "absl/status/status.h"
#include "app/server_config.h"
#include "service/allocator.h"

namespace chunkd::app {

// Builds the server `config` describes, serves until a stop signal among
// `signals` (blocked by BlockStopSignals), drains and stops. OK after a
// drain; an error, naming the flag and the problem, when the server could
// not start (nothing is served then).
// REQUIRES: CheckServerConfig(config) is OK; called once, from main's
// thread, `malloc_setup` from ConfigureMalloc.
absl::Status RunServer(const ServerConfig& config,
                       const service::MallocSetup& malloc_setup,
                       const sigset_t& signals);

}  // namespace chunkd::app

#endif  // CHUNKD_APP_SERVER_ASSEMBLY_H_
