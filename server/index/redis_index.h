// RedisIndex: the FingerprintIndex in one Redis server ("redis") or in a
// Redis Cluster ("redis-cluster"). docs/design.md, "The fingerprint index".
//
// Data model: redis_layout.h. Entries are fields of bucket hashes
// (chunkd-b<bits>:<ns>:<fingerprint prefix>), a database's layout named by
// its key chunkd-layout, read at the first call (a database of the
// key-per-entry layout of chunkd 0.3 is refused, naming
// `chunkctl index migrate`).
//
// Writes are Lua scripts, loaded on every new connection (SCRIPT LOAD) and
// called by EVALSHA; after NOSCRIPT (SCRIPT FLUSH, a failover to a replica
// without the scripts) they are loaded again and the call is re-sent
// (NOSCRIPT means nothing ran). A script call takes many entry keys, so that
// the fixed cost of running a script (a few SETs' worth of server time) is
// paid once per call, not per fingerprint: on one server a call carries
// up to 256 entries of the batch; in a cluster the entries of one slot
// (Redis Cluster allows no more), mostly of one bucket. A call is atomic as
// a whole: a count never changes without its entry, and on one server a
// batch of up to 256 fingerprints is applied all or nothing (unless its
// WriteToken positions cross a multiple of 65536, where a call ends: see
// the records below). (Redis does not roll back a script that fails
// half-way; Redis refuses a script for lack of memory only at its first
// write, before it changed anything, so that none does here.)
//
// A full Redis (maxmemory reached, maxmemory-policy noeviction; an evicting
// Redis would silently drop entries instead, see IndexOptions::warn).
// Redis refuses the writes that would grow it with "OOM command not allowed
// when used memory > 'maxmemory'.": a script call that would create an
// entry is refused as a whole, and the batch fails with RESOURCE_EXHAUSTED
// naming the server, quoting Redis and saying what to do (raise maxmemory,
// release chunks). Other calls of the batch may have been applied (on one
// server every call of up to 256 fingerprints before it; in a cluster the
// calls to other slots): retry with the same WriteToken. Everything else
// keeps working: reads, releases, and inserts whose fingerprints all exist
// (they count references, created nothing; the scripts get past Redis'
// check, see redis_scripts.cc, so Redis grows past maxmemory by their
// idempotency records only). RecordNextSizes records nothing on a full
// server and returns OK (hints only save work). Health() is
// RESOURCE_EXHAUSTED while INFO memory says a server is full (see
// RedisEndpoint::Probe), OK again once it has room. EntryCount() is
// nullopt: counting would scan every server.
//
// Batches. A batch is one pipelined round trip per server: all commands
// appended, then all replies read. In a cluster the batch is split by slot
// owner (CRC16 of the key mod 16384, Redis' hash-tag rule included); every
// node's pipeline is written before any reply is read, so the nodes work in
// parallel. MOVED updates the slot map and re-sends to the new owner, ASK
// re-sends with ASKING first, TRYAGAIN (a multi-key call meeting a slot in
// migration) re-sends one key per call after a pause, and the slot map is
// reloaded (CLUSTER SLOTS + CLUSTER NODES, at most every 100 ms) after
// MOVED, a node failure or a slot found without a master. Writes in a
// cluster end each node's pipeline with WAIT for its replica
// (IndexOptions::cluster_wait_replicas): a batch is reported applied only
// once a failover can no longer lose it.
// A master the map knows no replica of is asked ROLE instead, and waited
// for when it has one online (a replica that came back causes no MOVED).
//
// Failures. Every error but a full server's is UNAVAILABLE naming the
// server; the index never aborts (nor dies of SIGPIPE). A call that failed
// without running (no master for its slot, a connection refused or in its
// reconnect backoff, CLUSTERDOWN, MASTERDOWN, READONLY, LOADING, BUSY,
// TRYAGAIN) is sent again, at once the first time (on a fresh connection),
// then after pauses of 20 ms doubling to 500 ms, with the slot map
// reloaded, until it goes through or the failover wait is over
// (IndexOptions::failover_wait, counted from the start of the outage; see
// redis_wait.h): a failover or a restart costs the caller time, not an
// error. A call whose connection failed after it was sent, or whose WAIT
// fell short, has an unknown outcome: reads and token-carrying writes are
// sent again the same way (that is safe), other writes fail at once — and
// may have been applied. StopWaiting() ends every wait.
//
// Idempotency records (WriteToken), per (namespace, operation, stream id),
// written by the same script call that applies the positions, with PEXPIRE
// token_ttl; they hold, per position, the result returned then:
//   chunkd-tok:<ns>:<i|r>:<stream_id>:<block>       (redis) a string of 8
//       bytes (big-endian) per position p, for the 65536 positions from
//       block * 65536, at offset 8 * (p mod 65536), zero for a position not
//       written (so a release stores the count left plus one): read and
//       written with one GETRANGE and one SETRANGE per call, about 8 bytes
//       of Redis memory per position;
//   chunkd-tok:<ns>:<i|r>:<stream_id>:{<slot tag>}  (redis-cluster) a hash,
//       position -> result (decimal), one per slot, since a call's keys
//       must share a slot and its positions are then scattered: about
//       50-100 bytes per position. <slot tag> is a decimal string that
//       hashes to the slot of the entry keys. While a slot migrates,
//       token-carrying writes to it meet TRYAGAIN and wait (as above) until
//       the slot has moved.
//
// Thread safety: thread-safe.
#ifndef CHUNKD_INDEX_REDIS_INDEX_H_
#define CHUNKD_INDEX_REDIS_INDEX_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "index/fingerprint_index.h"
#include "index/redis_config.h"
#include "index/redis_connection.h"
#include "index/redis_layout.h"
#include "index/redis_wait.h"

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

class RedisIndex final : public FingerprintIndex {
 public:
  explicit RedisIndex(RedisConfig config);
  RedisIndex(const RedisIndex&) = delete;
  RedisIndex& operator=(const RedisIndex&) = delete;
  ~RedisIndex() override;

  absl::string_view backend() const override;
  absl::Status Health() override;
  void StopWaiting() override;
  std::optional<WaitCounts> FailoverWaits() override;

  using FingerprintIndex::Insert;
  using FingerprintIndex::Release;

  absl::StatusOr<std::vector<bool>> Lookup(
      absl::string_view ns,
      absl::Span<const std::string> fingerprints) override;
  absl::StatusOr<std::vector<InsertResult>> Insert(
      absl::string_view ns, absl::Span<const InsertEntry> entries,
      const WriteToken* token) override;
  absl::StatusOr<std::vector<uint64_t>> Release(
      absl::string_view ns, absl::Span<const std::string> fingerprints,
      const WriteToken* token) override;
  absl::Status RecordNextSizes(absl::string_view ns,
                               absl::string_view params_key,
                               absl::Span<const NextSize> hints) override;
  absl::StatusOr<std::vector<NextHints>> NextHintsOf(
      absl::string_view ns, absl::string_view params_key,
      absl::Span<const std::string> fingerprints) override;

  // The Lua scripts (redis_scripts.h), for tests.
  static const std::vector<std::string>& Scripts();

  using LayoutPtr = std::shared_ptr<const BucketLayout>;
  // The database's layout (redis_layout.h; nullptr with
  // RedisConfig::legacy_layout), read from its layout key at the first call
  // and again at every Health() (a migration under way refuses calls, with
  // UNAVAILABLE, until it has finished); a new database gets one.
  // FAILED_PRECONDITION, naming what to do, for a database of another
  // layout; waits as `wait` says for Redis.
  absl::Status Layout(FailoverWait& wait, LayoutPtr* layout);

  // A command's reply: an integer, nil, or strings (a string's, a status',
  // an array's of strings).
  struct CommandReply {
    long long integer = 0;
    bool nil = false;
    std::vector<std::string> strings;
  };
  // Runs `commands`, each on the key args[1] (EVAL: args[3]), routed, pipelined and waited
  // for as index calls are (for `chunkctl index migrate`). An error reply
  // fails the whole as an index call fails.
  absl::StatusOr<std::vector<CommandReply>> Commands(
      const std::vector<std::vector<std::string>>& commands, bool writes);
  // Every master (one server: that server); UNAVAILABLE when a slot has
  // none.
  absl::StatusOr<std::vector<RedisEndpoint*>> Masters();

  class BatchOp;  // one batched operation; defined in redis_index.cc

 private:
  absl::Status Run(BatchOp& op);
  absl::Status Run(BatchOp& op, FailoverWait& wait);
  absl::StatusOr<std::vector<CommandReply>> Commands(
      const std::vector<std::vector<std::string>>& commands, bool writes,
      FailoverWait& wait);
  absl::Status RecheckLayout();
  absl::Status FindLegacyKeys();
  absl::StatusOr<LayoutRecord> ReadLayoutRecord(FailoverWait& wait);
  absl::StatusOr<int> LoadLayout(FailoverWait& wait, bool first);
  absl::Status CheckLayoutRecord(const LayoutRecord& record) const;
  absl::Status Prepare(absl::string_view ns, LayoutPtr* layout,
                       absl::Span<const std::string> fingerprints);

  const RedisConfig config_;
  ConnectionSettings settings_;
  FailoverWait wait_;
  std::unique_ptr<RedisTopology> topology_;
  std::mutex layout_mu_;
  LayoutPtr layout_;      // guarded by layout_mu_
  absl::Status refusal_;  // guarded by layout_mu_: a migration under way

};

// UNAVAILABLE: a migration of the index is under way (its layout key says
// migrating).
absl::Status MigratingStatus();

// REQUIRES: config comes from ParseRedisSpec.
absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateRedisIndex(
    RedisConfig config);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_INDEX_H_
