#include "app/shutdown.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "platform/error_reason.h"
#include "service/connection_guard.h"
#include "service/goaway.h"

namespace chunkd::app {
namespace {

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
bool WaitForClients(service::ChunkServiceImpl& service, int port,
                    absl::Time deadline) {
  const absl::Time settled = absl::Now() + kSettle;
  while (true) {
    const absl::Time now = absl::Now();
    if (!service.WaitForCalls(std::min(deadline, now + kDrainPoll))) {
      if (now >= deadline) return false;
      continue;
    }
    if (now >= deadline || now >= settled ||
        service::CountConnections(port) == 0) {
      return true;
    }
    absl::SleepFor(kDrainPoll);
  }
}

}  // namespace

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int WaitForSignal(const sigset_t& signals, index::FingerprintIndex& index) {
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

void Drain(int sig, absl::Duration grace, const DrainParts& parts) {
  service::ChunkServiceImpl& service = *parts.service;
  index::FingerprintIndex& index = *parts.index;
  const absl::Time deadline = absl::Now() + grace;
  std::fprintf(stderr, "chunkd: signal %d, draining (%zu streams, grace %s)\n",
               sig, service.active_streams(),
               absl::FormatDuration(grace).c_str());
  // NOT_SERVING for every service name, and no later update: the index
  // monitor, stopped last (a probe under way may wait on Redis), no longer
  // changes it.
  parts.health->Shutdown();
  bool finished = false;
  if (service::GoAway(*parts.server)) {
    finished = WaitForClients(service, parts.port, deadline);
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
    service.AbortAll(chunkd::WithReason(
        absl::UnavailableError(absl::StrCat(
            "chunkd is shutting down; the stream did not finish within the ",
            absl::FormatDuration(grace),
            " grace period (--shutdown_grace) and was cancelled")),
        chunkd::ErrorReason::kShuttingDown));
    service.WaitForCalls(absl::Now() + kAbortWait);
  }
  // Unary calls still waiting for Redis end with UNAVAILABLE before the
  // deadline below would cancel them.
  index.StopWaiting();
  parts.server->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownWait));
  parts.server->Wait();
  parts.index_health->Stop();
  parts.trimmer->Stop();
}

}  // namespace chunkd::app
