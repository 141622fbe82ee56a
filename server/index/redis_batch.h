// The batch runner of the Redis index: one index call (a RedisBatchOp: the
// commands of Lookup, Insert, … over many fingerprints, redis_ops.h) sent
// to the servers and its replies read. docs/design.md, "The redis and
// redis-cluster backends", says how a batch is pipelined and waited for.
//
// What RedisBatch promises, whatever the op:
// - one pipelined round trip per server and round: every server's commands
//   are written before any reply is read; in a cluster the calls are
//   grouped by slot owner (RedisTopology), a call holding items of one
//   slot;
// - MOVED and ASK re-send to the server named, NOSCRIPT reloads the
//   scripts and re-sends, TRYAGAIN re-sends one item per call (at most
//   kMaxRounds such rounds in a row);
// - writes in a cluster end each pipeline with WAIT for the master's
//   replicas (IndexOptions::cluster_wait_replicas), or ROLE for a master
//   the slot map knows no replica of; a WAIT that falls short leaves the
//   outcome unknown;
// - a call that did not run (no route, connection refused, CLUSTERDOWN,
//   MASTERDOWN, READONLY, LOADING, BUSY, TRYAGAIN) is sent again, at once
//   and then after pauses of kFirstPause doubling to kMaxPause, until the
//   FailoverWait's deadline; one whose outcome is unknown is sent again
//   only if the op is idempotent, and otherwise fails saying it may have
//   been applied;
// - the first failure is the batch's status: UNAVAILABLE naming the server,
//   RESOURCE_EXHAUSTED for a full one, INTERNAL for a reply of the wrong
//   shape. The runner never aborts.
//
// Thread safety: a RedisBatch is one call's, used by one thread; ops are
// not shared. Many batches run at once over one topology.
#ifndef CHUNKD_INDEX_REDIS_BATCH_H_
#define CHUNKD_INDEX_REDIS_BATCH_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "index/fingerprint_index.h"
#include "index/redis_connection.h"
#include "index/redis_topology.h"
#include "index/redis_wait.h"

namespace chunkd::index {

// An argv for redisAppendCommandArgv; the strings must outlive Append().
class RedisArgs {
 public:
  void Add(absl::string_view a) {
    argv_.push_back(a.data());
    len_.push_back(a.size());
  }
  void Append(redisContext* context) {
    RedisAppend(context, static_cast<int>(argv_.size()), argv_.data(),
                len_.data());
  }

 private:
  std::vector<const char*> argv_;
  std::vector<size_t> len_;
};

// One batched operation: items (fingerprints) grouped into calls, a call
// being one command over items of one slot, and a parser for its reply.
class RedisBatchOp {
 public:
  RedisBatchOp(bool writes, bool idempotent, size_t max_keys_per_call)
      : writes_(writes),
        idempotent_(idempotent),
        max_keys_per_call_(max_keys_per_call) {}
  RedisBatchOp(const RedisBatchOp&) = delete;
  RedisBatchOp& operator=(const RedisBatchOp&) = delete;
  virtual ~RedisBatchOp() = default;

  bool writes() const { return writes_; }
  // Whether re-sending a call whose outcome is unknown is harmless.
  bool idempotent() const { return idempotent_; }
  size_t max_keys_per_call() const { return max_keys_per_call_; }
  size_t size() const { return keys_.size(); }
  const std::string& key(size_t i) const { return keys_[i]; }

  // Outside a cluster a call carries consecutive items; true when item i
  // must start a new call.
  virtual bool StartsCall(size_t /*i*/) const { return false; }
  // Appends one command over `items` (all in `slot`, -1 outside a cluster).
  virtual void Append(redisContext* context, absl::Span<const size_t> items,
                      int slot) const = 0;
  // Takes the (non-error) reply of that command; false if it has an
  // unexpected shape.
  virtual bool Accept(absl::Span<const size_t> items,
                      const redisReply& reply) = 0;

 protected:
  std::vector<std::string> keys_;

 private:
  const bool writes_;
  const bool idempotent_;
  const size_t max_keys_per_call_;
};

// One run of a RedisBatchOp. Its items are split into calls, then sent in
// rounds: a round groups the pending calls by server, sends every server's
// pipeline, then reads the replies; the calls redirected, to re-send or to
// retry after a failure make the next round, until none is left or the
// batch has failed. After a round with failures the next one comes at
// once, later ones after a pause, until `wait`'s deadline (the failover
// wait). Sending is in redis_batch.cc, reading the replies in
// redis_batch_replies.cc.
class RedisBatch {
 public:
  // Up to this many rounds of redirections (MOVED, ASK, NOSCRIPT) in a
  // row; a pause after a failure starts the count again.
  static constexpr int kMaxRounds = 8;
  // Pauses between the attempts of a call that waits for Redis to come
  // back (IndexOptions::failover_wait): after the first failure none (the
  // call is re-sent at once, on a fresh connection), then these, doubling.
  static constexpr absl::Duration kFirstPause = absl::Milliseconds(20);
  static constexpr absl::Duration kMaxPause = absl::Milliseconds(500);

  // REQUIRES: every argument outlives the batch.
  RedisBatch(RedisBatchOp& op, RedisTopology& topology,
             const IndexOptions& options, FailoverWait& wait)
      : op_(op),
        topology_(topology),
        options_(options),
        wait_(wait),
        cluster_(topology.cluster()) {}
  RedisBatch(const RedisBatch&) = delete;
  RedisBatch& operator=(const RedisBatch&) = delete;

  // Sends every item of the op; OK once each call's reply was accepted.
  absl::Status Run();

 private:
  // One command over items of one slot.
  struct Call {
    std::vector<size_t> items;
    int slot = -1;
    RedisEndpoint* redirect = nullptr;  // MOVED/ASK target for next round
    bool asking = false;
  };
  // The calls of one round that go to one server: one pipeline.
  struct Group {
    RedisEndpoint* endpoint = nullptr;
    int replicas = 0;
    std::vector<size_t> calls;
    std::optional<RedisEndpoint::Lease> lease;
    int wait = 0;  // replicas the WAIT at the end of the pipeline asks for
    bool ask_role = false;  // the pipeline ends with ROLE instead (ReadRole)
    bool reload_scripts = false;
  };

  // redis_batch.cc: calls, rounds, pauses, sending.
  void SplitConsecutive();
  void SplitBySlot();
  bool BeginRound();
  bool Pause();
  absl::Status WaitedInVain() const;
  void EndWait();
  std::vector<Group> GroupByServer();
  void SendAll(std::vector<Group>& groups);
  void Send(Group& g);
  void AppendWait(Group& g, redisContext* context);
  void AppendWaitFor(Group& g, redisContext* context, int count);
  // redis_batch_replies.cc: replies, errors, retries.
  void ReadReplies(Group& g);
  absl::Status ReadReply(Group& g, redisContext* context, size_t c);
  absl::Status Broke(Group& g, redisContext* context, size_t c);
  void OnError(Group& g, size_t c, absl::string_view error);
  void Redirect(Group& g, size_t c, absl::string_view error, int slot,
                absl::string_view address);
  void SplitIntoSingles(size_t c);
  absl::Status ReadRole(Group& g, redisContext* context);
  absl::Status ReadWait(Group& g, redisContext* context);
  void Resend(size_t c);
  void RetryOrFail(size_t c, absl::Status status, bool sent);
  void Fail(absl::Status status);

  RedisBatchOp& op_;
  RedisTopology& topology_;
  const IndexOptions& options_;
  FailoverWait& wait_;
  const bool cluster_;
  std::vector<Call> calls_;
  std::vector<size_t> pending_;  // calls to send this round
  std::vector<size_t> next_;     // calls to send next round
  absl::Status failure_;
  int rounds_ = 0;  // rounds since the start or the last pause
  // Calls failed this round and are to be re-sent: pause first. Why the
  // last of them failed.
  bool pause_ = false;
  absl::Status retry_why_;
  int failed_rounds_ = 0;
  absl::Time deadline_ = absl::InfiniteFuture();  // set at the first failure
  absl::Duration pause_length_ = kFirstPause;
  bool waiting_ = false;  // wait_.Begin() was called
  absl::Time waiting_since_;
};

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_BATCH_H_
