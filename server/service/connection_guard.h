// ConnectionGuard: the rapid-reset defence (docs/operations.md, "Running
// chunkd exposed").
//
// HTTP/2 lets a client open a stream and reset it at once, so
// MAX_CONCURRENT_STREAMS never binds. gRPC 1.51 accepts such streams as fast
// as it can parse them and keeps each call's state until the application
// has seen and finished it; a single connection resetting streams faster
// than the server's callback threads retire them grows the process by
// gigabytes (measured: 100,000 streams, +1.7 GiB). gRPC 1.57 and later
// bound this inside the transport; 1.51 cannot, so chunkd bounds it here.
//
// Every call on every service passes through this interceptor factory,
// which counts new streams per connection (the peer address identifies it)
// in a token bucket of `max_stream_rate` streams per second, one second
// deep. A connection past its rate is "over rate": the ChunkService
// handlers refuse its streams cheaply with RESOURCE_EXHAUSTED naming the
// flag. Refused streams run up a debt that drains at the same rate; a
// connection whose debt reaches a second's worth of streams (it keeps
// opening streams at more than twice the rate) is closed: its socket is
// shut down, which ends the transport and cancels all its calls at once,
// so gRPC stops reading it.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_SERVICE_CONNECTION_GUARD_H_
#define CHUNKD_SERVICE_CONNECTION_GUARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"

namespace chunkd::service {

// The token buckets, without gRPC: pure logic fed with times.
class StreamRateLimiter {
 public:
  enum class Verdict {
    kAdmit,   // within the rate
    kRefuse,  // over the rate: refuse the stream
    kClose,   // far over the rate: close the connection (reported once)
  };

  // `rate`: new streams per second per connection, also the bucket's depth.
  // REQUIRES: rate > 0.
  explicit StreamRateLimiter(double rate);

  // Counts a new stream on `connection` at `now` (times do not decrease).
  Verdict OnNewStream(const std::string& connection, absl::Time now);
  // True while `connection`'s latest stream found its bucket empty.
  bool OverRate(const std::string& connection) const;
  // Connections tracked now (for tests).
  size_t size() const;

 private:
  struct Bucket {
    double tokens = 0;
    absl::Time last;
    double debt = 0;    // refused streams, draining at `rate` per second
    bool over = false;  // the latest stream found the bucket empty
    bool closed = false;
  };
  void SweepLocked(absl::Time now);

  const double rate_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_;  // guarded by mu_
  absl::Time last_sweep_;                             // guarded by mu_
};

// Shuts down (both directions) the accepted TCP socket of this process whose
// remote address is `peer` (a gRPC peer string, "ipv4:1.2.3.4:5678" or
// "ipv6:[::1]:5678") and whose local port is `local_port`. Returns the
// number of sockets shut down: 0 when none matches or the peer is not
// TCP. The socket stays open until gRPC closes it, so its descriptor is
// never reused under gRPC's feet.
int ShutdownConnection(const std::string& peer, int local_port);

// The accepted TCP connections of this process whose local port is
// `local_port` and which gRPC has not closed yet (0 for a port <= 0).
int CountConnections(int local_port);

class ConnectionGuard final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Called once per closed connection, outside the guard's lock.
  using CloseCallback = std::function<void(const std::string& peer)>;

  // `max_stream_rate`: --max_stream_rate_per_connection; 0 turns the guard
  // off (every stream admitted, no connection closed).
  ConnectionGuard(double max_stream_rate, CloseCallback on_close);

  // The gRPC port (known after the server started); until it is set no
  // connection is closed.
  void set_local_port(int port) { local_port_.store(port); }

  // True when the connection `peer` is over its rate: refuse the stream.
  bool OverRate(const std::string& peer) const;

  double max_stream_rate() const { return rate_; }

  // The refusal of a call (`calls`: "streams" or "calls") of a connection
  // over its rate: RESOURCE_EXHAUSTED, reason CALL_RATE, naming the flag.
  absl::Status RateError(absl::string_view calls) const;

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const double rate_;
  const CloseCallback on_close_;
  StreamRateLimiter limiter_;
  std::atomic<int> local_port_{0};
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_CONNECTION_GUARD_H_
