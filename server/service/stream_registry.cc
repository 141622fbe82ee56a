#include "service/stream_registry.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace chunkd::service {

const char* RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kLimit:
      return "limit";
    case RejectReason::kPerTokenLimit:
      return "per_token_limit";
    case RejectReason::kPerIpLimit:
      return "per_ip_limit";
    case RejectReason::kRate:
      return "rate";
    case RejectReason::kIdle:
      return "idle";
    case RejectReason::kToken:
      return "token";
    case RejectReason::kAuth:
      return "auth";
    case RejectReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

StreamRegistry::StreamRegistry(RegistryLimits limits) : limits_(limits) {}

Admission StreamRegistry::Admit(ActiveStream* stream,
                                const StreamOwner& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) {
    return {absl::UnavailableError(
                "chunkd is shutting down and accepts no new streams; retry on "
                "another replica"),
            RejectReason::kShutdown};
  }
  if (limits_.max_streams != 0 && streams_.size() >= limits_.max_streams) {
    return {absl::ResourceExhaustedError(absl::StrCat(
                "chunkd is serving its limit of ", limits_.max_streams,
                " streams (--max_streams); retry later with backoff, or on "
                "another replica")),
            RejectReason::kLimit};
  }
  auto count_of = [](const absl::flat_hash_map<std::string, size_t>& counts,
                     const std::string& key) -> size_t {
    auto it = counts.find(key);
    return it == counts.end() ? 0 : it->second;
  };
  const bool per_token =
      limits_.max_streams_per_token != 0 && !owner.token.empty();
  const bool per_ip = limits_.max_streams_per_ip != 0 && !owner.ip.empty();
  if (per_token &&
      count_of(per_token_, owner.token) >= limits_.max_streams_per_token) {
    return {absl::ResourceExhaustedError(absl::StrCat(
                "this bearer token already runs ",
                limits_.max_streams_per_token,
                " streams, its limit (--max_streams_per_token); finish or "
                "cancel some, or retry later with backoff")),
            RejectReason::kPerTokenLimit};
  }
  if (per_ip && count_of(per_ip_, owner.ip) >= limits_.max_streams_per_ip) {
    return {absl::ResourceExhaustedError(absl::StrCat(
                "client ", owner.ip, " already runs ",
                limits_.max_streams_per_ip,
                " streams, its limit (--max_streams_per_ip); finish or "
                "cancel some, or retry later with backoff")),
            RejectReason::kPerIpLimit};
  }
  Entry entry;
  if (per_token) {
    ++per_token_[owner.token];
    entry.token = owner.token;
  }
  if (per_ip) {
    ++per_ip_[owner.ip];
    entry.ip = owner.ip;
  }
  streams_.emplace(stream, std::move(entry));
  ++admitted_;
  return {absl::OkStatus(), RejectReason::kLimit};
}

void StreamRegistry::Remove(ActiveStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    auto release = [](absl::flat_hash_map<std::string, size_t>& counts,
                      const std::string& key) {
      if (key.empty()) return;
      auto count = counts.find(key);
      if (count != counts.end() && --count->second == 0) counts.erase(count);
    };
    release(per_token_, it->second.token);
    release(per_ip_, it->second.ip);
    streams_.erase(it);
  }
  cv_.notify_all();
}

void StreamRegistry::BeginShutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
}

bool StreamRegistry::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

bool StreamRegistry::WaitForStreams(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, absl::ToChronoTime(deadline),
                        [this] { return streams_.empty(); });
}

void StreamRegistry::ForEach(const std::function<void(ActiveStream*)>& visit) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [stream, entry] : streams_) visit(stream);
}

size_t StreamRegistry::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

uint64_t StreamRegistry::admitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return admitted_;
}

std::string PeerIp(const std::string& peer) {
  absl::string_view rest = peer;
  if (!absl::ConsumePrefix(&rest, "ipv4:") &&
      !absl::ConsumePrefix(&rest, "ipv6:")) {
    return peer;
  }
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return peer;
  absl::string_view host = rest.substr(0, colon);
  if (absl::ConsumePrefix(&host, "%5B") || absl::ConsumePrefix(&host, "%5b")) {
    if (!absl::ConsumeSuffix(&host, "%5D")) absl::ConsumeSuffix(&host, "%5d");
  } else if (absl::ConsumePrefix(&host, "[")) {
    absl::ConsumeSuffix(&host, "]");
  }
  return std::string(host);
}

}  // namespace chunkd::service
