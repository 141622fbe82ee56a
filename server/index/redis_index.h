// RedisIndex: the FingerprintIndex in one Redis server ("redis") or in a
// Redis Cluster ("redis-cluster"). docs/design.md, "The redis and
// redis-cluster backends", gives the keys and values it writes, how a batch
// is sent and how failures are handled; "When the index is full or
// unreachable" what callers see.
//
// What it promises beyond FingerprintIndex's contract:
// - a database of another layout (the key-per-entry layout of chunkd 0.3,
//   or a layout version this build does not read) is refused with
//   FAILED_PRECONDITION naming `chunkctl index migrate`; while a migration
//   runs, calls fail with UNAVAILABLE (MigratingStatus);
// - a failover or restart costs a call time, up to
//   IndexOptions::failover_wait, not an error; after that, or when
//   StopWaiting() was called, calls fail with UNAVAILABLE naming the server;
// - a write without a WriteToken whose outcome is unknown fails at once,
//   saying that it may have been applied; one with a token is re-sent;
// - a full Redis (maxmemory, noeviction) refuses with RESOURCE_EXHAUSTED
//   only the calls that would create an entry; RecordNextSizes then records
//   nothing and returns OK; EntryCount() is nullopt.
//
// The parts: the operations (redis_ops.h), the batch runner
// (redis_batch.h), the routing (redis_topology.h, redis_cluster.h), the
// connections (redis_connection.h), the layout (redis_layout.h, read in
// redis_index_layout.cc) and the scripts (redis_scripts.h).
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
#include "index/redis_ops.h"
#include "index/redis_topology.h"
#include "index/redis_wait.h"

namespace chunkd::index {

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

  using CommandReply = RedisCommandReply;
  // Runs `commands`, each on the key args[1] (EVAL: args[3]), routed,
  // pipelined and waited for as index calls are (for `chunkctl index
  // migrate`). An error reply fails the whole as an index call fails.
  absl::StatusOr<std::vector<CommandReply>> Commands(
      const std::vector<std::vector<std::string>>& commands, bool writes);
  // Every master (one server: that server); UNAVAILABLE when a slot has
  // none.
  absl::StatusOr<std::vector<RedisEndpoint*>> Masters();

 private:
  absl::Status Run(RedisBatchOp& op);
  absl::Status Run(RedisBatchOp& op, FailoverWait& wait);
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
