// LogThrottle: events that a client can cause at will (failed TLS
// handshakes, connections closed for abuse) are logged as one line per
// kind and interval with their count and the latest example, never a line
// each: a port scan must not flood the log.
//
// GrpcLogFilter routes gRPC's own log through one: its "Handshake
// failed" lines are counted, everything else is printed as gRPC would.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_SERVICE_LOG_THROTTLE_H_
#define CHUNKD_SERVICE_LOG_THROTTLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace chunkd::service {

class LogThrottle {
 public:
  using Sink = std::function<void(const std::string& line)>;

  // `interval` is what the lines say ("in the last 10s"); Flush() is meant
  // to be called that often.
  LogThrottle(absl::Duration interval, Sink sink);
  LogThrottle(const LogThrottle&) = delete;
  LogThrottle& operator=(const LogThrottle&) = delete;

  // Counts one event of `kind` (e.g. "TLS handshakes failed"); `example`
  // describes it and replaces the previous one.
  void Note(absl::string_view kind, absl::string_view example);

  // Writes one line per kind with events since the last Flush:
  // "<count> <kind> in the last <interval> (last: <example>)".
  void Flush();

 private:
  struct Pending {
    uint64_t count = 0;
    std::string example;
  };
  const absl::Duration interval_;
  const Sink sink_;
  std::mutex mu_;
  std::map<std::string, Pending> pending_;  // guarded by mu_; ordered output
};

// The kind under which failed TLS handshakes are counted.
inline constexpr char kTlsHandshakeFailures[] = "TLS handshakes failed";

// While it exists, gRPC logs through `throttle`: a failed TLS handshake
// becomes Note(kTlsHandshakeFailures, its reason) and a call of
// `on_handshake_failure`; other lines are printed to stderr as gRPC's
// default logger does. Its destructor gives gRPC its default logger back.
// One at a time; `throttle` and what the callback uses must outlive it.
class GrpcLogFilter {
 public:
  GrpcLogFilter(LogThrottle* throttle,
                std::function<void()> on_handshake_failure);
  ~GrpcLogFilter();
  GrpcLogFilter(const GrpcLogFilter&) = delete;
  GrpcLogFilter& operator=(const GrpcLogFilter&) = delete;
};

// True for the text of a gRPC log line reporting a failed TLS handshake.
bool IsHandshakeFailure(absl::string_view message);

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_LOG_THROTTLE_H_
