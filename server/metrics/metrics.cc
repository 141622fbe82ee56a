#include "metrics/metrics.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace chunkd::metrics {

Metrics::Metrics(absl::string_view version, absl::string_view backend)
    : registry_(std::make_shared<prometheus::Registry>()) {
  ingest_bytes_ = &prometheus::BuildCounter()
                       .Name("chunkd_ingest_bytes_total")
                       .Help("Bytes received by Chunk and Dedup streams.")
                       .Register(*registry_);
  chunks_ = &prometheus::BuildCounter()
                 .Name("chunkd_chunks_total")
                 .Help("Chunks produced by Chunk and Dedup streams.")
                 .Register(*registry_);
  duplicate_bytes_ = &prometheus::BuildCounter()
                          .Name("chunkd_duplicate_bytes_total")
                          .Help("Bytes of Dedup chunks already in the index.")
                          .Register(*registry_);
  duplicate_chunks_ = &prometheus::BuildCounter()
                           .Name("chunkd_duplicate_chunks_total")
                           .Help("Dedup chunks already in the index.")
                           .Register(*registry_);
  rpcs_handled_ = &prometheus::BuildCounter()
                       .Name("grpc_server_handled_total")
                       .Help("RPCs completed on the server, by method and code.")
                       .Register(*registry_);
  active_streams_ = &prometheus::BuildGauge()
                         .Name("chunkd_active_streams")
                         .Help("Chunk and Dedup streams in progress.")
                         .Register(*registry_)
                         .Add({});
  prometheus::BuildGauge()
      .Name("chunkd_build_info")
      .Help("Constant 1, labelled with the version and chunking backend.")
      .Register(*registry_)
      .Add({{"version", std::string(version)}, {"backend", std::string(backend)}})
      .Set(1);
  // Fixed label sets exist from the start, at zero.
  for (const char* rpc : {"Chunk", "Dedup"}) {
    for (const char* algorithm : {"fastcdc", "crc32", "seqcdc", "fixed"}) {
      ForStream(rpc, algorithm);
    }
  }
}

Metrics::~Metrics() = default;

absl::Status Metrics::Serve(const std::string& listen) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot serve metrics on --metrics_listen ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry_);
  return absl::OkStatus();
}

StreamCounters Metrics::ForStream(absl::string_view rpc,
                                  absl::string_view algorithm) {
  const prometheus::Labels labels{{"rpc", std::string(rpc)},
                                  {"algorithm", std::string(algorithm)}};
  StreamCounters c;
  c.ingest_bytes = &ingest_bytes_->Add(labels);
  c.chunks = &chunks_->Add(labels);
  if (rpc == "Dedup") {
    const prometheus::Labels alg{{"algorithm", std::string(algorithm)}};
    c.duplicate_bytes = &duplicate_bytes_->Add(alg);
    c.duplicate_chunks = &duplicate_chunks_->Add(alg);
  }
  return c;
}

void Metrics::RecordRpc(absl::string_view method, absl::string_view code) {
  rpcs_handled_
      ->Add({{"grpc_service", "chunkd.v1.ChunkService"},
             {"grpc_method", std::string(method)},
             {"grpc_code", std::string(code)}})
      .Increment();
}

}  // namespace chunkd::metrics
