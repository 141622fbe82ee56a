// Metrics: every Prometheus metric chunkd exports is defined here and nowhere
// else (DESIGN.md §8). Served by prometheus-cpp on its own port at /metrics.
//
// Thread safety: thread-safe. Counter and gauge handles returned by the
// accessors stay valid for the lifetime of the Metrics object.
#ifndef CHUNKD_METRICS_METRICS_H_
#define CHUNKD_METRICS_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace chunkd::metrics {

// Counters of one stream's traffic, looked up once at the stream's start.
struct StreamCounters {
  prometheus::Counter* ingest_bytes = nullptr;
  prometheus::Counter* chunks = nullptr;
  prometheus::Counter* duplicate_bytes = nullptr;   // Dedup only
  prometheus::Counter* duplicate_chunks = nullptr;  // Dedup only
};

class Metrics {
 public:
  // `version` and `backend` label chunkd_build_info.
  Metrics(absl::string_view version, absl::string_view backend);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Starts the HTTP endpoint on `listen` ("host:port"). FAILED_PRECONDITION
  // naming the address when it cannot bind.
  absl::Status Serve(const std::string& listen);

  // The counters of a stream of `rpc` ("Chunk" or "Dedup") with `algorithm`.
  StreamCounters ForStream(absl::string_view rpc, absl::string_view algorithm);

  // Streams in progress.
  prometheus::Gauge& active_streams() { return *active_streams_; }

  // Counts one finished RPC by method and status code name.
  void RecordRpc(absl::string_view method, absl::string_view code);

  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* ingest_bytes_;
  prometheus::Family<prometheus::Counter>* chunks_;
  prometheus::Family<prometheus::Counter>* duplicate_bytes_;
  prometheus::Family<prometheus::Counter>* duplicate_chunks_;
  prometheus::Family<prometheus::Counter>* rpcs_handled_;
  prometheus::Gauge* active_streams_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace chunkd::metrics

#endif  // CHUNKD_METRICS_METRICS_H_
