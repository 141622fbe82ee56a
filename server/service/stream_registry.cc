#include "service/stream_registry.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "platform/error_reason.h"

namespace chunkd::service {

const char* RejectReasonLabel(RejectReason reason) {
  switch (reason) {
    case RejectReason::kLimit:
      return "limit";
    case RejectReason::kPerTokenLimit:
      return "per_token_limit";
    case RejectReason::kPerIpLimit:
      return "per_ip_limit";
    case RejectReason::kPerConnectionLimit:
      return "per_connection_limit";
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

absl::Status ShuttingDownError() {
  return WithReason(
      absl::UnavailableError("chunkd is shutting down and accepts no new "
                             "streams; retry on another replica"),
      ErrorReason::kShuttingDown);
}

StreamRegistry::StreamRegistry(RegistryLimits limits) : limits_(limits) {
  shares_[0].limit = limits.max_streams_per_token;
  shares_[1].limit = limits.max_streams_per_ip;
  shares_[2].limit = limits.max_streams_per_connection;
}

StreamRegistry::Keys StreamRegistry::KeysOf(const StreamOwner& owner) {
  return {owner.token, owner.ip, owner.connection};
}

Admission StreamRegistry::Refusal(size_t i, const std::string& key) const {
  const size_t limit = shares_[i].limit;
  switch (i) {
    case 0:
      return {LimitRefusal(
                  ErrorReason::kPerTokenStreamLimit, "--max_streams_per_token",
                  absl::StrCat(limit),
                  absl::StrCat("this bearer token already runs ", limit,
                               " streams, its limit (--max_streams_per_token);"
                               " finish or cancel some, or retry later with "
                               "backoff")),
              RejectReason::kPerTokenLimit};
    case 1:
      return {LimitRefusal(
                  ErrorReason::kPerIpStreamLimit, "--max_streams_per_ip",
                  absl::StrCat(limit),
                  absl::StrCat("client ", key, " already runs ", limit,
                               " streams, its limit (--max_streams_per_ip); "
                               "finish or cancel some, or retry later with "
                               "backoff")),
              RejectReason::kPerIpLimit};
    default:
      return {LimitRefusal(
                  ErrorReason::kPerConnectionStreamLimit,
                  "--max_streams_per_connection", absl::StrCat(limit),
                  absl::StrCat("this connection already runs ", limit,
                               " streams, chunkd's limit (twice "
                               "--max_streams_per_connection: a stream the "
                               "client reset counts until chunkd has ended "
                               "it); finish some, or open another "
                               "connection")),
              RejectReason::kPerConnectionLimit};
  }
}

Admission StreamRegistry::Admit(ActiveStream* stream,
                                const StreamOwner& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) {
    return {ShuttingDownError(), RejectReason::kShutdown};
  }
  if (limits_.max_streams != 0 && streams_.size() >= limits_.max_streams) {
    return {LimitRefusal(ErrorReason::kStreamLimit, "--max_streams",
                         absl::StrCat(limits_.max_streams),
                         absl::StrCat("chunkd is serving its limit of ",
                                      limits_.max_streams,
                                      " streams (--max_streams); retry later "
                                      "with backoff, or on another replica")),
            RejectReason::kLimit};
  }
  Keys keys = KeysOf(owner);
  for (size_t i = 0; i < kShares; ++i) {
    if (shares_[i].limit == 0 || keys[i].empty()) {
      keys[i].clear();  // not counted
      continue;
    }
    auto it = shares_[i].counts.find(keys[i]);
    if (it != shares_[i].counts.end() && it->second >= shares_[i].limit) {
      return Refusal(i, keys[i]);
    }
  }
  for (size_t i = 0; i < kShares; ++i) {
    if (!keys[i].empty()) ++shares_[i].counts[keys[i]];
  }
  streams_.emplace(stream, std::move(keys));
  ++admitted_;
  return {absl::OkStatus(), RejectReason::kLimit};
}

void StreamRegistry::Remove(ActiveStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return;
    for (size_t i = 0; i < kShares; ++i) {
      const std::string& key = it->second[i];
      if (key.empty()) continue;
      auto count = shares_[i].counts.find(key);
      if (count != shares_[i].counts.end() && --count->second == 0) {
        shares_[i].counts.erase(count);
      }
    }
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
