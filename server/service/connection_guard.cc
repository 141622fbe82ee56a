#include "service/connection_guard.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "platform/error_reason.h"
#include "service/stream_registry.h"

namespace chunkd::service {
namespace {

// Buckets idle this long are full again and dropped.
constexpr absl::Duration kForgetAfter = absl::Seconds(10);

// An IPv4 or IPv6 address and port, IPv4-mapped IPv6 folded to IPv4.
struct Endpoint {
  int family = 0;
  unsigned char address[16] = {};
  uint16_t port = 0;

  bool operator==(const Endpoint& other) const {
    const size_t size = family == AF_INET ? 4 : 16;
    return family == other.family && port == other.port &&
           std::memcmp(address, other.address, size) == 0;
  }
};

bool FromSockaddr(const sockaddr_storage& storage, Endpoint* out) {
  if (storage.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
    out->family = AF_INET;
    std::memcpy(out->address, &in.sin_addr, 4);
    out->port = ntohs(in.sin_port);
    return true;
  }
  if (storage.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(storage);
    out->port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      out->family = AF_INET;
      std::memcpy(out->address, &in6.sin6_addr.s6_addr[12], 4);
    } else {
      out->family = AF_INET6;
      std::memcpy(out->address, &in6.sin6_addr, 16);
    }
    return true;
  }
  return false;
}

bool ParsePeer(const std::string& peer, Endpoint* out) {
  const std::string ip = PeerIp(peer);
  if (ip == peer) return false;  // no port, or not ipv4/ipv6
  absl::string_view port = peer;
  port.remove_prefix(port.rfind(':') + 1);
  uint32_t port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return false;
  }
  out->port = static_cast<uint16_t>(port_number);
  if (inet_pton(AF_INET, ip.c_str(), out->address) == 1) {
    out->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, ip.c_str(), out->address) == 1) {
    out->family = AF_INET6;
    in6_addr mapped;
    std::memcpy(&mapped, out->address, 16);
    if (IN6_IS_ADDR_V4MAPPED(&mapped)) {
      out->family = AF_INET;
      std::memmove(out->address, out->address + 12, 4);
    }
    return true;
  }
  return false;
}

}  // namespace

StreamRateLimiter::StreamRateLimiter(double rate) : rate_(rate) {}

StreamRateLimiter::Verdict StreamRateLimiter::OnNewStream(
    const std::string& connection, absl::Time now) {
  std::lock_guard<std::mutex> lock(mu_);
  SweepLocked(now);
  auto [it, inserted] = buckets_.try_emplace(connection);
  Bucket& bucket = it->second;
  if (inserted) {
    bucket.tokens = rate_;
    bucket.last = now;
  } else {
    const double refill = absl::ToDoubleSeconds(now - bucket.last) * rate_;
    bucket.tokens = std::min(rate_, bucket.tokens + std::max(0.0, refill));
  }
  // The refused streams' debt drains at the same rate: it grows only while
  // streams arrive at more than twice the rate.
  const double elapsed = std::max(0.0, absl::ToDoubleSeconds(now - bucket.last));
  bucket.debt = std::max(0.0, bucket.debt - elapsed * rate_);
  bucket.last = now;
  if (bucket.tokens >= 1) {
    bucket.tokens -= 1;
    bucket.over = false;
    return Verdict::kAdmit;
  }
  bucket.over = true;
  bucket.debt += 1;
  if (!bucket.closed && bucket.debt >= rate_) {
    bucket.closed = true;
    return Verdict::kClose;
  }
  return Verdict::kRefuse;
}

bool StreamRateLimiter::OverRate(const std::string& connection) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(connection);
  return it != buckets_.end() && it->second.over;
}

size_t StreamRateLimiter::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

void StreamRateLimiter::SweepLocked(absl::Time now) {
  if (now - last_sweep_ < kForgetAfter) return;
  last_sweep_ = now;
  absl::erase_if(buckets_, [now](const auto& entry) {
    return now - entry.second.last > kForgetAfter;
  });
}

namespace {

// Calls `visit(fd, remote)` for every connected TCP socket of this process
// whose local port is `local_port`.
template <typename Visit>
void ForEachConnection(int local_port, Visit visit) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  while (const dirent* entry = readdir(fds)) {
    int fd = 0;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == dirfd(fds)) continue;
    sockaddr_storage storage;
    socklen_t size = sizeof(storage);
    Endpoint remote;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &size) != 0 ||
        !FromSockaddr(storage, &remote)) {
      continue;
    }
    size = sizeof(storage);
    Endpoint local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &size) != 0 ||
        !FromSockaddr(storage, &local) || local.port != local_port) {
      continue;
    }
    visit(fd, remote);
  }
  closedir(fds);
}

}  // namespace

int ShutdownConnection(const std::string& peer, int local_port) {
  Endpoint want;
  if (local_port <= 0 || !ParsePeer(peer, &want)) return 0;
  int shut = 0;
  ForEachConnection(local_port, [&](int fd, const Endpoint& remote) {
    if (remote == want && shutdown(fd, SHUT_RDWR) == 0) ++shut;
  });
  return shut;
}

int CountConnections(int local_port) {
  int count = 0;
  if (local_port > 0) {
    ForEachConnection(local_port, [&count](int, const Endpoint&) { ++count; });
  }
  return count;
}

ConnectionGuard::ConnectionGuard(double max_stream_rate, CloseCallback on_close)
    : rate_(max_stream_rate),
      on_close_(std::move(on_close)),
      limiter_(max_stream_rate > 0 ? max_stream_rate : 1) {}

bool ConnectionGuard::OverRate(const std::string& peer) const {
  return rate_ > 0 && limiter_.OverRate(peer);
}

absl::Status ConnectionGuard::RateError(absl::string_view calls) const {
  return LimitRefusal(
      ErrorReason::kCallRate, "--max_stream_rate_per_connection",
      absl::StrCat(rate_),
      absl::StrCat("this connection opens ", calls, " faster than ", rate_,
                   " per second (--max_stream_rate_per_connection); slow "
                   "down, or the connection is closed"));
}

grpc::experimental::Interceptor* ConnectionGuard::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (rate_ <= 0) return nullptr;
  const std::string peer = info->server_context()->peer();
  if (limiter_.OnNewStream(peer, absl::Now()) ==
      StreamRateLimiter::Verdict::kClose) {
    if (ShutdownConnection(peer, local_port_.load()) > 0 && on_close_) {
      on_close_(peer);
    }
  }
  return nullptr;  // nothing to intercept: counting is all
}

}  // namespace chunkd::service
