#include "service/grpc_metrics.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/status.h"

namespace chunkd::service {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

constexpr const char* kHealthService = "grpc.health.v1.Health";

const char* TypeLabel(bool client_streaming, bool server_streaming) {
  if (client_streaming && server_streaming) return "bidi_stream";
  if (client_streaming) return "client_stream";
  if (server_streaming) return "server_stream";
  return "unary";
}

// Counts one RPC: started on construction, handled when the status is sent.
class GrpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit GrpcMetricsInterceptor(const metrics::GrpcMethodMetrics* metrics)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    metrics_->started->Increment();
  }

  ~GrpcMetricsInterceptor() override {
    // Gone without a status: the call broke before the server finished it.
    Handled(grpc::StatusCode::CANCELLED);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      Handled(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Handled(grpc::StatusCode code) {
    if (handled_.exchange(true)) return;
    const std::chrono::duration<double> elapsed =
        std::chrono::steady_clock::now() - start_;
    metrics_->handling_seconds->Observe(elapsed.count());
    const int index = static_cast<int>(code);
    metrics_->handled[index >= 0 && index < 17 ? index : 2]->Increment();
  }

  const metrics::GrpcMethodMetrics* const metrics_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<bool> handled_{false};
};

}  // namespace

GrpcMetricsInterceptorFactory::GrpcMetricsInterceptorFactory(metrics::Metrics* metrics)
    : metrics_(metrics) {}

absl::StatusOr<std::unique_ptr<GrpcMetricsInterceptorFactory>>
GrpcMetricsInterceptorFactory::Create(
    metrics::Metrics* metrics, const std::vector<std::string>& services) {
  std::unique_ptr<GrpcMetricsInterceptorFactory> factory(
      new GrpcMetricsInterceptorFactory(metrics));
  auto add = [&](const std::string& service, const std::string& method,
                 const char* type) {
    factory->methods_.emplace(absl::StrCat("/", service, "/", method),
                              metrics->ForGrpcMethod(type, service, method));
  };
  for (const std::string& service : services) {
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            service);
    if (descriptor != nullptr) {
      for (int i = 0; i < descriptor->method_count(); ++i) {
        const google::protobuf::MethodDescriptor* m = descriptor->method(i);
        add(service, m->name(),
            TypeLabel(m->client_streaming(), m->server_streaming()));
      }
    } else if (service == kHealthService) {
      // grpc/health/v1/health.proto
      add(service, "Check", "unary");
      add(service, "Watch", "server_stream");
    } else {
      return absl::NotFoundError(absl::StrCat(
          "gRPC service ", service,
          " is not in the protobuf generated pool; cannot count its RPCs"));
    }
  }
  factory->unknown_ = metrics->ForGrpcMethod("unknown", "unknown", "unknown");
  return factory;
}

grpc::experimental::Interceptor*
GrpcMetricsInterceptorFactory::CreateServerInterceptor(ServerRpcInfo* info) {
  const char* path = info->method();
  auto it = path == nullptr ? methods_.end() : methods_.find(path);
  return new GrpcMetricsInterceptor(it == methods_.end() ? &unknown_
                                                         : &it->second);
}

}  // namespace chunkd::service
