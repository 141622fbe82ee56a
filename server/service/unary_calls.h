// The unary calls of ChunkService: FindMissing, Release and GetServerInfo
// (docs/design.md, "The fingerprint index" and "API and authorization"; the
// ChunkServiceImpl methods are defined in unary_calls.cc).
//
// Promises: a call over the connection's stream rate is RESOURCE_EXHAUSTED;
// a request that does not parse, or names a bad namespace, fingerprint or
// request id, is INVALID_ARGUMENT naming the problem, checked on gRPC's
// thread; FindMissing and Release, which may reach a remote index, run on the
// worker pool and are counted in PoolCalls until they answered, so that a
// drain waits for them; GetServerInfo answers inline.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_SERVICE_UNARY_CALLS_H_
#define CHUNKD_SERVICE_UNARY_CALLS_H_

#include <cstddef>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chunkd/v1/chunkd.pb.h"

namespace chunkd::service {

struct ServiceOptions;

// Most fingerprints in one FindMissing request.
inline constexpr int kMaxFindMissingFingerprints = 10000;
// Most fingerprints in one Release request.
inline constexpr int kMaxReleaseFingerprints = 10000;

// Counts calls handed to the worker pool, so that a drain can wait for
// them. Thread-safe.
class PoolCalls {
 public:
  PoolCalls() = default;
  PoolCalls(const PoolCalls&) = delete;
  PoolCalls& operator=(const PoolCalls&) = delete;

  // A call starts; each Enter is followed by one Exit when it has answered.
  void Enter();
  void Exit();
  // Waits until no call is under way or `deadline` passes; true if none is.
  bool WaitForNone(absl::Time deadline);

 private:
  absl::Mutex mu_;
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
};

// At most `max` fingerprints of `digest_size` bytes each (0: 32 or 16);
// INVALID_ARGUMENT naming the first bad entry otherwise.
absl::Status ValidateFingerprintList(
    const google::protobuf::RepeatedPtrField<std::string>& fingerprints,
    int max, size_t digest_size);

// Release's checks beyond the namespace: the fingerprint algorithm, the
// list, the request id.
absl::Status ValidateRelease(const v1::ReleaseRequest& r);

// GetServerInfo's answer for a service with `options`.
void FillServerInfo(const ServiceOptions& options,
                    v1::GetServerInfoResponse* response);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_UNARY_CALLS_H_
