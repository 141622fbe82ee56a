// RedisTopology: which server a key's commands go to — one server
// (SingleTopology, below) or a cluster's slot map (ClusterTopology,
// redis_cluster.h) — and the health of those servers. The batch runner
// (redis_batch.h) asks it for routes and tells it of failures and
// redirections; it never sends index commands itself.
//
// Thread safety: implementations are thread-safe.
#ifndef CHUNKD_INDEX_REDIS_TOPOLOGY_H_
#define CHUNKD_INDEX_REDIS_TOPOLOGY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "index/redis_config.h"
#include "index/redis_connection.h"

namespace chunkd::index {

// Where the commands for one slot go.
struct RedisRoute {
  RedisEndpoint* endpoint = nullptr;  // nullptr: nobody serves the slot
  int replicas = 0;                   // replicas of that master (cluster)
};

// How keys map to servers: one server, or a cluster's slot map.
// Thread safety: implementations are thread-safe.
class RedisTopology {
 public:
  virtual ~RedisTopology() = default;

  virtual bool cluster() const = 0;
  // Reloads the routing if it is known to be stale (cheap otherwise).
  virtual void Refresh() = 0;
  // The server for `slot` (-1 outside a cluster).
  virtual RedisRoute Route(int slot) = 0;
  // Why Route(slot) has no endpoint, as UNAVAILABLE; the routing is then
  // reloaded at the next Refresh().
  virtual absl::Status NoRoute(int slot) = 0;
  // The server a MOVED (`moved`) or ASK redirection sent by `from` names.
  virtual RedisEndpoint* Redirect(int slot, absl::string_view address,
                                  bool moved, RedisEndpoint* from) = 0;
  // `endpoint` failed: the routing may be stale.
  virtual void NodeFailed(RedisEndpoint* endpoint) = 0;
  // The master `endpoint` said (ROLE) that `count` replicas are online: at
  // least that many are routed with its slots from now on. Default: no-op.
  virtual void ReplicasOnline(RedisEndpoint* /*endpoint*/, int /*count*/) {}
  // OK when every slot has a reachable server with room
  // (RedisEndpoint::Probe of each): UNAVAILABLE naming the first that is
  // unreachable, else RESOURCE_EXHAUSTED naming the first that is full.
  virtual absl::Status Health() = 0;
  // Every master; `complete`: UNAVAILABLE when a slot has none, else the
  // masters of the slots that have one.
  virtual absl::StatusOr<std::vector<RedisEndpoint*>> Masters(
      bool complete) = 0;
};

// Standalone: every key goes to one server.
class SingleTopology final : public RedisTopology {
 public:
  // REQUIRES: `settings` outlives the topology.
  SingleTopology(const RedisAddress& address,
                 const ConnectionSettings* settings)
      : endpoint_(address, settings) {}
  SingleTopology(const SingleTopology&) = delete;
  SingleTopology& operator=(const SingleTopology&) = delete;

  bool cluster() const override { return false; }
  void Refresh() override {}
  RedisRoute Route(int) override { return {&endpoint_, 0}; }
  absl::Status NoRoute(int) override {
    return endpoint_.Unreachable("no route");
  }
  RedisEndpoint* Redirect(int, absl::string_view, bool,
                          RedisEndpoint*) override {
    return nullptr;
  }
  void NodeFailed(RedisEndpoint*) override {}
  absl::Status Health() override { return endpoint_.Probe(); }
  absl::StatusOr<std::vector<RedisEndpoint*>> Masters(bool) override {
    return std::vector<RedisEndpoint*>{&endpoint_};
  }

 private:
  RedisEndpoint endpoint_;
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_TOPOLOGY_H_
