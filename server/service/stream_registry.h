// StreamRegistry: which Chunk and Dedup streams chunkd serves now, and the
// admission of new ones (docs/operations.md, "Running chunkd exposed").
//
// A stream is admitted when the server is not draining, fewer than
// max_streams run, and its caller's token (with --auth_tokens), client IP
// address and connection each hold fewer than their own limit; otherwise
// Admit names the limit that refused it. The per-connection share matters
// because HTTP/2 lets a client reset streams and open new ones past
// SETTINGS_MAX_CONCURRENT_STREAMS: a reset stream counts here until chunkd
// has ended it. Only admitted streams are counted, so refused streams
// never take a slot and the count never exceeds max_streams.
//
// Thread safety: thread-safe. The visitor of ForEach runs under the
// registry's lock: it may take a stream's lock, but a stream must never call
// into the registry while holding its own lock.
#ifndef CHUNKD_SERVICE_STREAM_REGISTRY_H_
#define CHUNKD_SERVICE_STREAM_REGISTRY_H_

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace chunkd::service {

// Why a stream was refused or ended early: the `reason` label of
// chunkd_streams_rejected_total.
enum class RejectReason {
  kLimit,          // --max_streams
  kPerTokenLimit,  // --max_streams_per_token
  kPerIpLimit,     // --max_streams_per_ip
  kPerConnectionLimit,  // --max_streams_per_connection
  kRate,           // --max_stream_rate_per_connection
  kIdle,           // ended by --stream_idle_timeout
  kToken,          // no known bearer token (UNAUTHENTICATED)
  kAuth,           // the token may not use the namespace (PERMISSION_DENIED)
  kShutdown,       // chunkd is draining
};
inline constexpr RejectReason kAllRejectReasons[] = {
    RejectReason::kLimit, RejectReason::kPerTokenLimit,
    RejectReason::kPerIpLimit, RejectReason::kPerConnectionLimit,
    RejectReason::kRate, RejectReason::kIdle,
    RejectReason::kToken, RejectReason::kAuth, RejectReason::kShutdown};
const char* RejectReasonLabel(RejectReason reason);

// The refusal of a new stream while chunkd drains: UNAVAILABLE, reason
// SHUTTING_DOWN.
absl::Status ShuttingDownError();

// A running stream that the service can end early.
class ActiveStream {
 public:
  virtual ~ActiveStream() = default;
  // Ends the stream with `status` as soon as no write is in flight.
  virtual void Abort(const absl::Status& status) = 0;
  // How long the stream has waited on its client (no request read and no
  // response written) as of `now`; zero while chunkd itself holds it up
  // (input still to process, a task running, the memory budget full).
  virtual absl::Duration IdleFor(absl::Time now) = 0;
};

struct RegistryLimits {
  // Streams at once; 0: no limit.
  size_t max_streams = 0;
  // Streams at once per bearer token; 0: no limit.
  size_t max_streams_per_token = 0;
  // Streams at once per client IP address; 0: no limit.
  size_t max_streams_per_ip = 0;
  // Streams at once per connection; 0: no limit.
  size_t max_streams_per_connection = 0;
};

// Who opens a stream: the keys its per-token, per-IP and per-connection
// limits count under (empty: not counted).
struct StreamOwner {
  std::string token;
  std::string ip;
  std::string connection;  // the gRPC peer string
};

// The outcome of Admit.
struct Admission {
  absl::Status status;  // OK when admitted
  RejectReason reason = RejectReason::kLimit;  // why not, when not OK
};

class StreamRegistry {
 public:
  explicit StreamRegistry(RegistryLimits limits);
  StreamRegistry(const StreamRegistry&) = delete;
  StreamRegistry& operator=(const StreamRegistry&) = delete;

  // Admits `stream` of `owner`, or says which limit refused it (the stream
  // is then not registered). Error messages name the flag.
  Admission Admit(ActiveStream* stream, const StreamOwner& owner);
  // Removes an admitted stream and wakes WaitForStreams.
  void Remove(ActiveStream* stream);

  // From now on Admit refuses with UNAVAILABLE.
  void BeginShutdown();
  bool shutting_down() const;
  // Waits until no stream is registered or `deadline` passes; true if none.
  bool WaitForStreams(absl::Time deadline);
  // Calls `visit` for every registered stream, under the registry's lock.
  void ForEach(const std::function<void(ActiveStream*)>& visit);

  size_t active() const;
  // Streams admitted since the start.
  uint64_t admitted() const;

 private:
  // One share of the streams: a limit per key (a token, an address, a
  // connection) and the streams each key runs.
  struct Share {
    size_t limit = 0;  // 0: not counted
    absl::flat_hash_map<std::string, size_t> counts;
  };
  static constexpr size_t kShares = 3;  // token, IP, connection
  using Keys = std::array<std::string, kShares>;
  static Keys KeysOf(const StreamOwner& owner);
  // The refusal of share `i` for `key`.
  Admission Refusal(size_t i, const std::string& key) const;

  const RegistryLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // The keys each stream counts under ("" where not counted).
  absl::flat_hash_map<ActiveStream*, Keys> streams_;  // guarded by mu_
  std::array<Share, kShares> shares_;                 // guarded by mu_
  uint64_t admitted_ = 0;                               // guarded by mu_
  bool shutting_down_ = false;                          // guarded by mu_
};

// The IP address of a gRPC peer string ("ipv4:10.0.0.7:51234",
// "ipv6:[::1]:51234", or percent-encoded brackets); the whole string when
// it has no port (e.g. "unix:/path").
std::string PeerIp(const std::string& peer);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_STREAM_REGISTRY_H_
