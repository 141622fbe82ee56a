// Redis Cluster routing: key slots and the slot map of a cluster.
//
// A key's slot is CRC16-XMODEM of the key mod 16384, or of its hash tag: the
// bytes between the first '{' and the first '}' after it, when that is not
// empty (Redis' keyHashSlot, which a client must reproduce exactly or every
// command is answered with MOVED). chunkd's entry keys carry no tag of their
// own; a binary fingerprint may contain braces and is then hashed as Redis
// hashes it.
//
// ClusterTopology keeps slot -> master (and that master's replica count)
// from CLUSTER SLOTS, asked of any reachable known node (the seeds, then
// every node learned since). It is reloaded when marked stale — after MOVED,
// a node failure or a failed load — at most every kMinRefreshInterval.
//
// Thread safety: the functions are pure; ClusterTopology is thread-safe.
#ifndef CHUNKD_INDEX_REDIS_CLUSTER_H_
#define CHUNKD_INDEX_REDIS_CLUSTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "index/redis_config.h"
#include "index/redis_connection.h"
#include "index/redis_topology.h"

namespace chunkd::index {

inline constexpr int kClusterSlots = 16384;

// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
uint16_t Crc16Xmodem(absl::string_view data);

// The cluster slot of `key` (0..16383).
int KeySlot(absl::string_view key);

// A short decimal string t with KeySlot(t) == slot, so that a key containing
// "{t}" (and no earlier '{') lives in `slot`.
// REQUIRES: 0 <= slot < kClusterSlots.
const std::string& SlotTag(int slot);

class ClusterTopology final : public RedisTopology {
 public:
  static constexpr absl::Duration kMinRefreshInterval = absl::Milliseconds(100);

  // REQUIRES: `settings` outlives the topology; seeds not empty.
  ClusterTopology(const std::vector<RedisAddress>& seeds,
                  const ConnectionSettings* settings);
  ClusterTopology(const ClusterTopology&) = delete;
  ClusterTopology& operator=(const ClusterTopology&) = delete;

  bool cluster() const override { return true; }
  void Refresh() override;
  RedisRoute Route(int slot) override;
  absl::Status NoRoute(int slot) override;
  RedisEndpoint* Redirect(int slot, absl::string_view address, bool moved,
                          RedisEndpoint* from) override;
  void NodeFailed(RedisEndpoint* endpoint) override;
  void ReplicasOnline(RedisEndpoint* endpoint, int count) override;
  absl::Status Health() override;
  absl::StatusOr<std::vector<RedisEndpoint*>> Masters(bool complete) override;

 private:
  RedisEndpoint* EndpointFor(const RedisAddress& address);
  // Loads the slot map from the first node that answers.
  void Load();

  const ConnectionSettings* const settings_;
  std::string seeds_text_;

  std::mutex endpoints_mu_;
  // Never shrinks, so RedisEndpoint pointers stay valid for the lifetime.
  absl::flat_hash_map<std::string, std::unique_ptr<RedisEndpoint>>
      endpoints_;                      // guarded by endpoints_mu_
  std::vector<RedisEndpoint*> known_;  // guarded by endpoints_mu_, seeds first

  std::shared_mutex map_mu_;
  std::vector<RedisEndpoint*> masters_;  // guarded by map_mu_, per slot
  std::vector<uint8_t> replicas_;        // guarded by map_mu_, per slot
  bool loaded_ = false;                  // guarded by map_mu_

  std::atomic<bool> stale_{true};
  std::mutex refresh_mu_;                        // one load at a time
  absl::Time last_load_ = absl::InfinitePast();  // guarded by refresh_mu_
  std::mutex error_mu_;
  absl::Status last_load_error_;  // guarded by error_mu_
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_CLUSTER_H_
