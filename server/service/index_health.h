// IndexHealthMonitor: probes a FingerprintIndex's Health() on its own thread
// every `interval` and reports each change of serving state, so that chunkd
// can publish the readiness of the RPCs that need the index (the gRPC
// health service name kDedupHealthService) while the rest keeps serving.
//
// Why a thread of its own: a probe of a remote index blocks for up to the
// connect or command timeout while the server is unreachable, and neither a
// gRPC reactor nor a worker of the shared pool may block (docs/design.md, "Threading model").
//
// Thread safety: Start and Stop from one owner thread; the callback runs on
// the monitor's thread, never concurrently with itself, and never after
// Stop() returns.
#ifndef CHUNKD_SERVICE_INDEX_HEALTH_H_
#define CHUNKD_SERVICE_INDEX_HEALTH_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"
#include "service/periodic.h"

namespace chunkd::service {

// The gRPC health service name whose status follows the index: NOT_SERVING
// while Dedup (and FindMissing, Release) cannot reach the index. The
// overall status ("") and "chunkd.v1.ChunkService" stay SERVING meanwhile,
// because Chunk and GetServerInfo do not need the index.
inline constexpr char kDedupHealthService[] = "chunkd.v1.ChunkService.Dedup";

class IndexHealthMonitor {
 public:
  // Called with the first probe's result and then whenever the status code
  // changes (e.g. UNAVAILABLE to RESOURCE_EXHAUSTED): `status` is OK when
  // the index serves, otherwise why not.
  using Callback = std::function<void(const absl::Status& status)>;

  // REQUIRES: `index` outlives the monitor; interval > 0.
  IndexHealthMonitor(index::FingerprintIndex* index, absl::Duration interval,
                     Callback on_change);
  IndexHealthMonitor(const IndexHealthMonitor&) = delete;
  IndexHealthMonitor& operator=(const IndexHealthMonitor&) = delete;
  // Stops the thread.
  ~IndexHealthMonitor();

  // Takes `status` as the state already reported: that of a probe the
  // owner ran and published itself, e.g. before the server served. The
  // thread then reports only a change from it, not a first state.
  // REQUIRES: before Start().
  void SetReported(const absl::Status& status);
  // Starts probing: at once, then every `interval` after a probe ends.
  void Start();
  // Ends the loop (a probe under way finishes first) and joins the thread.
  // No callback runs after it returns. Idempotent.
  void Stop();

 private:
  // One probe; reports the result when its code changed.
  void Probe();

  index::FingerprintIndex* const index_;
  const Callback on_change_;
  // Used by Probe() only, on the thread.
  bool first_ = true;
  absl::StatusCode last_ = absl::StatusCode::kOk;
  PeriodicThread thread_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_INDEX_HEALTH_H_
