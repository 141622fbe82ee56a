#include "service/log_throttle.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/support/log.h"

namespace chunkd::service {
namespace {

std::atomic<LogThrottle*> g_throttle{nullptr};
std::function<void()>* g_on_handshake_failure = nullptr;

void FilterGrpcLog(gpr_log_func_args* args) {
  LogThrottle* throttle = g_throttle.load();
  if (throttle != nullptr && args->message != nullptr &&
      IsHandshakeFailure(args->message)) {
    throttle->Note(kTlsHandshakeFailures, args->message);
    if (g_on_handshake_failure != nullptr && *g_on_handshake_failure) {
      (*g_on_handshake_failure)();
    }
    return;
  }
  // What gRPC's own logger prints, less the timestamp and thread id.
  const char* file = args->file == nullptr ? "" : args->file;
  if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
  std::fprintf(stderr, "%s %s:%d] %s\n",
               gpr_log_severity_string(args->severity), file, args->line,
               args->message == nullptr ? "" : args->message);
}

}  // namespace

LogThrottle::LogThrottle(absl::Duration interval, Sink sink)
    : interval_(interval), sink_(std::move(sink)) {}

void LogThrottle::Note(absl::string_view kind, absl::string_view example) {
  std::lock_guard<std::mutex> lock(mu_);
  Pending& pending = pending_[std::string(kind)];
  ++pending.count;
  pending.example.assign(example.data(), example.size());
}

void LogThrottle::Flush() {
  std::map<std::string, Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(pending_);
  }
  for (const auto& [kind, p] : pending) {
    sink_(absl::StrCat(p.count, " ", kind, " in the last ",
                       absl::FormatDuration(interval_), " (last: ", p.example,
                       ")"));
  }
}

bool IsHandshakeFailure(absl::string_view message) {
  return absl::StartsWith(message, "Handshake failed") ||
         absl::StartsWith(message, "Security handshake failed");
}

GrpcLogFilter::GrpcLogFilter(LogThrottle* throttle,
                             std::function<void()> on_handshake_failure) {
  g_on_handshake_failure =
      new std::function<void()>(std::move(on_handshake_failure));
  g_throttle.store(throttle);
  gpr_set_log_function(FilterGrpcLog);
}

GrpcLogFilter::~GrpcLogFilter() {
  gpr_set_log_function(nullptr);  // gRPC's default logger
  g_throttle.store(nullptr);
  // g_on_handshake_failure stays: a line being filtered right now may
  // still read it.
}

}  // namespace chunkd::service
