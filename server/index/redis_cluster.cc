#include "index/redis_cluster.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace chunkd::index {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

// One range of CLUSTER SLOTS: [start, end] served by master.
struct SlotRange {
  int start = 0;
  int end = 0;
  RedisAddress master;
  std::string master_id;
};

bool ParseNode(const redisReply* node, absl::string_view default_host,
               RedisAddress* out) {
  if (node == nullptr || node->type != REDIS_REPLY_ARRAY ||
      node->elements < 2 || node->element[0]->type != REDIS_REPLY_STRING ||
      node->element[1]->type != REDIS_REPLY_INTEGER) {
    return false;
  }
  out->host.assign(node->element[0]->str, node->element[0]->len);
  // An empty or "?" endpoint means "the address you reached me at".
  if (out->host.empty() || out->host == "?") {
    out->host = std::string(default_host);
  }
  out->port = static_cast<int>(node->element[1]->integer);
  return out->port > 0 && out->port <= 65535;
}

bool ParseClusterSlots(const redisReply& reply, absl::string_view default_host,
                       std::vector<SlotRange>* ranges) {
  if (reply.type != REDIS_REPLY_ARRAY) return false;
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply* r = reply.element[i];
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
      return false;
    }
    SlotRange range;
    range.start = static_cast<int>(r->element[0]->integer);
    range.end = static_cast<int>(r->element[1]->integer);
    if (range.start < 0 || range.end < range.start ||
        range.end >= kClusterSlots) {
      return false;
    }
    if (!ParseNode(r->element[2], default_host, &range.master)) return false;
    const redisReply* node = r->element[2];
    if (node->elements >= 3 && node->element[2]->type == REDIS_REPLY_STRING) {
      range.master_id.assign(node->element[2]->str, node->element[2]->len);
    }
    ranges->push_back(std::move(range));
  }
  return true;
}

// Healthy replicas per master id, from CLUSTER NODES lines
// "<id> <addr> <flags> <master-id> ...". (CLUSTER SLOTS leaves out replicas
// that have not reported a replication offset yet, e.g. on an empty
// cluster, so it cannot be trusted for this.)
absl::flat_hash_map<std::string, int> ReplicasPerMaster(
    absl::string_view nodes) {
  absl::flat_hash_map<std::string, int> replicas;
  for (absl::string_view line :
       absl::StrSplit(nodes, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 8) continue;
    bool replica = false;
    bool down = false;
    for (absl::string_view flag : absl::StrSplit(f[2], ',')) {
      replica = replica || flag == "slave";
      down = down || flag == "fail" || flag == "fail?" || flag == "noaddr" ||
             flag == "handshake";
    }
    if (replica && !down && f[7] == "connected") ++replicas[f[3]];
  }
  return replicas;
}

}  // namespace

uint16_t Crc16Xmodem(absl::string_view data) {
  uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<uint16_t>((crc << 8) ^
                                kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  }
  return crc;
}

int KeySlot(absl::string_view key) {
  const size_t open = key.find('{');
  if (open != absl::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != absl::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16Xmodem(key) & (kClusterSlots - 1);
}

const std::string& SlotTag(int slot) {
  static const std::vector<std::string>* const tags = [] {
    auto* t = new std::vector<std::string>(kClusterSlots);
    int missing = kClusterSlots;
    for (uint64_t n = 0; missing > 0; ++n) {
      std::string candidate = std::to_string(n);
      std::string& tag = (*t)[KeySlot(candidate)];
      if (tag.empty()) {
        tag = std::move(candidate);
        --missing;
      }
    }
    return t;
  }();
  return (*tags)[slot];
}

ClusterTopology::ClusterTopology(const std::vector<RedisAddress>& seeds,
                                 const ConnectionSettings* settings)
    : settings_(settings),
      masters_(kClusterSlots, nullptr),
      replicas_(kClusterSlots, 0) {
  std::vector<std::string> names;
  for (const RedisAddress& seed : seeds) {
    names.push_back(EndpointFor(seed)->name());
  }
  seeds_text_ = absl::StrJoin(names, ",");
}

RedisEndpoint* ClusterTopology::EndpointFor(const RedisAddress& address) {
  std::lock_guard<std::mutex> lock(endpoints_mu_);
  std::unique_ptr<RedisEndpoint>& endpoint = endpoints_[address.ToString()];
  if (endpoint == nullptr) {
    endpoint = std::make_unique<RedisEndpoint>(address, settings_);
    known_.push_back(endpoint.get());
  }
  return endpoint.get();
}

void ClusterTopology::Refresh() {
  if (!stale_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(refresh_mu_);
  if (!stale_.load(std::memory_order_acquire)) return;
  const absl::Time now = absl::Now();
  if (now - last_load_ < kMinRefreshInterval) return;
  last_load_ = now;
  Load();
}

void ClusterTopology::Load() {
  // Masters of the current map first: they are the likeliest to answer.
  std::vector<RedisEndpoint*> candidates;
  {
    std::shared_lock<std::shared_mutex> lock(map_mu_);
    for (RedisEndpoint* master : masters_) {
      if (master != nullptr &&
          (candidates.empty() || candidates.back() != master)) {
        bool seen = false;
        for (RedisEndpoint* c : candidates) seen = seen || c == master;
        if (!seen) candidates.push_back(master);
      }
    }
  }
  {
    std::lock_guard<std::mutex> lock(endpoints_mu_);
    for (RedisEndpoint* endpoint : known_) {
      bool seen = false;
      for (RedisEndpoint* c : candidates) seen = seen || c == endpoint;
      if (!seen) candidates.push_back(endpoint);
    }
  }

  absl::Status error = absl::UnavailableError("no cluster node is known");
  for (RedisEndpoint* endpoint : candidates) {
    auto lease = endpoint->Acquire();
    if (!lease.ok()) {
      error = lease.status();
      continue;
    }
    // One round trip: the slot map and the replicas behind each master.
    redisContext* context = lease->context();
    const char* slots_argv[] = {"CLUSTER", "SLOTS"};
    const char* nodes_argv[] = {"CLUSTER", "NODES"};
    const size_t argv_len[] = {7, 5};
    RedisAppend(context, 2, slots_argv, argv_len);
    RedisAppend(context, 2, nodes_argv, argv_len);
    ReplyPtr reply = RedisReadReply(context);
    ReplyPtr nodes = reply == nullptr ? nullptr : RedisReadReply(context);
    if (reply == nullptr || nodes == nullptr) {
      error = endpoint->ContextError(context);
      lease->MarkBroken();
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      error = endpoint->ReplyError(absl::string_view(reply->str, reply->len));
      continue;
    }
    absl::flat_hash_map<std::string, int> replicas_of;
    if (nodes->type == REDIS_REPLY_STRING) {
      replicas_of =
          ReplicasPerMaster(absl::string_view(nodes->str, nodes->len));
    }
    std::vector<SlotRange> ranges;
    if (!ParseClusterSlots(*reply, endpoint->address().host, &ranges)) {
      error = absl::UnavailableError(
          absl::StrCat("redis at ", endpoint->name(),
                       " sent a malformed CLUSTER SLOTS reply"));
      continue;
    }
    std::vector<RedisEndpoint*> masters(kClusterSlots, nullptr);
    std::vector<uint8_t> replicas(kClusterSlots, 0);
    for (const SlotRange& range : ranges) {
      RedisEndpoint* master = EndpointFor(range.master);
      auto it = replicas_of.find(range.master_id);
      const int count = it == replicas_of.end() ? 0 : it->second;
      for (int slot = range.start; slot <= range.end; ++slot) {
        masters[slot] = master;
        replicas[slot] = static_cast<uint8_t>(std::min(count, 255));
      }
    }
    {
      std::unique_lock<std::shared_mutex> lock(map_mu_);
      masters_ = std::move(masters);
      replicas_ = std::move(replicas);
      loaded_ = true;
    }
    stale_.store(false, std::memory_order_release);
    std::lock_guard<std::mutex> lock(error_mu_);
    last_load_error_ = absl::OkStatus();
    return;
  }
  std::lock_guard<std::mutex> lock(error_mu_);
  last_load_error_ = absl::UnavailableError(
      absl::StrCat("redis cluster (seeds ", seeds_text_,
                   ") is unreachable: no node answered CLUSTER SLOTS; last: ",
                   error.message()));
}

RedisRoute ClusterTopology::Route(int slot) {
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  if (!loaded_) return {};
  return {masters_[slot], replicas_[slot]};
}

absl::Status ClusterTopology::NoRoute(int slot) {
  // A slot without a master: a failover may have ended since the last load.
  stale_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!last_load_error_.ok()) return last_load_error_;
  }
  return absl::UnavailableError(absl::StrCat(
      "redis cluster (seeds ", seeds_text_, "): no master serves slot ", slot));
}

RedisEndpoint* ClusterTopology::Redirect(int slot, absl::string_view address,
                                         bool moved, RedisEndpoint* from) {
  RedisAddress to;
  if (!address.empty() && address.front() == ':') {
    // Redis 7 omits an unknown endpoint: the sender's host.
    auto parsed =
        ParseRedisAddress(absl::StrCat(from->address().host, address));
    if (!parsed.ok()) return nullptr;
    to = *std::move(parsed);
  } else {
    auto parsed = ParseRedisAddress(address);
    if (!parsed.ok()) return nullptr;
    to = *std::move(parsed);
  }
  RedisEndpoint* endpoint = EndpointFor(to);
  if (moved && slot >= 0 && slot < kClusterSlots) {
    {
      std::unique_lock<std::shared_mutex> lock(map_mu_);
      masters_[slot] = endpoint;
      replicas_[slot] = 0;
    }
    // Whole ranges moved (a failover, a reshard): reload the map.
    stale_.store(true, std::memory_order_release);
  }
  return endpoint;
}

void ClusterTopology::NodeFailed(RedisEndpoint*) {
  stale_.store(true, std::memory_order_release);
}

// Not a reload: CLUSTER NODES can still flag a replica that came back as
// failed while its master already serves it.
void ClusterTopology::ReplicasOnline(RedisEndpoint* endpoint, int count) {
  const uint8_t online = static_cast<uint8_t>(std::clamp(count, 0, 255));
  std::unique_lock<std::shared_mutex> lock(map_mu_);
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    if (masters_[slot] == endpoint && replicas_[slot] < online) {
      replicas_[slot] = online;
    }
  }
}

absl::StatusOr<std::vector<RedisEndpoint*>> ClusterTopology::Masters(
    bool complete) {
  Refresh();
  std::vector<RedisEndpoint*> masters;
  std::shared_lock<std::shared_mutex> lock(map_mu_);
  if (!loaded_) return NoRoute(0);
  for (int slot = 0; slot < kClusterSlots; ++slot) {
    RedisEndpoint* master = masters_[slot];
    if (master == nullptr) {
      if (!complete) continue;
      lock.unlock();
      stale_.store(true, std::memory_order_release);
      return NoRoute(slot);
    }
    bool seen = false;
    for (RedisEndpoint* m : masters) seen = seen || m == master;
    if (!seen) masters.push_back(master);
  }
  return masters;
}

absl::Status ClusterTopology::Health() {
  absl::StatusOr<std::vector<RedisEndpoint*>> masters = Masters(true);
  if (!masters.ok()) return masters.status();
  // Every master is asked, so that one that is unreachable is reported
  // before one that is full.
  absl::Status full;
  for (RedisEndpoint* master : *masters) {
    absl::Status status = master->Probe();
    if (status.code() == absl::StatusCode::kResourceExhausted) {
      if (full.ok()) full = std::move(status);
    } else if (!status.ok()) {
      NodeFailed(master);
      return status;
    }
  }
  return full;
}

}  // namespace chunkd::index
