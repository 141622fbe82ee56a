// GrpcMetricsInterceptorFactory: grpc_server_started_total,
// grpc_server_handled_total and grpc_server_handling_seconds for every RPC
// the server serves, in the shape go-grpc-prometheus (and the Java
// equivalent) export, through a gRPC server interceptor, so that services
// need no code of their own and gRPC's health and reflection services are
// counted too.
//
// Labels: grpc_type ("unary", "client_stream", "server_stream",
// "bidi_stream"), grpc_service (the full name, "chunkd.v1.ChunkService"),
// grpc_method ("Chunk") and, on handled, grpc_code (GrpcCodeLabel). An RPC
// is started when gRPC creates it and handled when its status is sent; its
// handling time runs between the two. An RPC that ends without the server
// sending a status (the connection broke) is handled as "Canceled", so
// started and handled always agree once the RPC is over.
//
// Only the methods of the services named at construction are counted (their
// series exist from the start, at zero for every code); a call of any other
// method path gets UNIMPLEMENTED from gRPC and is counted under
// grpc_service="unknown", grpc_method="unknown", so a client cannot create
// series at will.
//
// Thread safety: thread-safe; the factory must outlive the server.
#ifndef CHUNKD_SERVICE_GRPC_METRICS_H_
#define CHUNKD_SERVICE_GRPC_METRICS_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/server_interceptor.h"
#include "metrics/metrics.h"

namespace chunkd::service {

class GrpcMetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `services`: full service names. Their methods come from the protobuf
  // generated pool; grpc.health.v1.Health, which gRPC serves without
  // generated C++ code, from a built-in table. NOT_FOUND naming a service
  // that is neither.
  static absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>> Create(
      metrics::Metrics* metrics, const std::vector<std::string>& services);

  GrpcMetricsInterceptorFactory(const GrpcMetricsInterceptorFactory&) = delete;
  GrpcMetricsInterceptorFactory& operator=(
      const GrpcMetricsInterceptorFactory&) = delete;

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  explicit GrpcMetricsInterceptorFactory(metrics::Metrics* metrics);

  metrics::Metrics* const metrics_;
  // Keyed by the method path, "/chunkd.v1.ChunkService/Chunk". Filled by
  // Create, read-only afterwards.
  absl::flat_hash_map<std::string, metrics::GrpcMethodMetrics> methods_;
  metrics::GrpcMethodMetrics unknown_;
};

}  // namespace chunkd::service

#endif  // CHUNKD_SERVICE_GRPC_METRICS_H_
