#include "index/redis_index.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "index/redis_cluster.h"
#include "index/redis_layout.h"
#include "index/redis_scripts.h"

namespace chunkd::index {
namespace {

// Up to this many rounds of redirections (MOVED, ASK, NOSCRIPT) in a row;
// a pause after a failure starts the count again.
constexpr int kMaxRounds = 8;
// Pauses between the attempts of a call that waits for Redis to come back
// (IndexOptions::failover_wait): after the first failure none (the call is
// re-sent at once, on a fresh connection), then these, doubling.
constexpr absl::Duration kFirstPause = absl::Milliseconds(20);
constexpr absl::Duration kMaxPause = absl::Milliseconds(500);
// Entry keys per script call on one server: bounds how long one call keeps
// Redis busy (about 0.5 ms).
constexpr size_t kMaxKeysPerCall = 256;

// Positions per string record (one server): 8 bytes each, so that one
// record holds at most 512 KiB and any position, however large, has a
// small record.
constexpr uint64_t kPositionsPerRecord = 65536;

// The record of `slot` (a hash; in a cluster), or of the positions
// [block * kPositionsPerRecord, (block + 1) * kPositionsPerRecord) (a
// string; slot -1, one server).
std::string TokenRecordKey(absl::string_view ns, char op,
                           absl::string_view stream_id, int slot,
                           uint64_t block) {
  const char op_string[] = {op, '\0'};
  if (slot < 0) {
    return absl::StrCat("chunkd-tok:", ns, ":", op_string, ":", stream_id,
                        ":", block);
  }
  return absl::StrCat("chunkd-tok:", ns, ":", op_string, ":", stream_id,
                      ":{", SlotTag(slot), "}");
}

// An argv for redisAppendCommandArgv; the strings must outlive Append().
class Args {
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

// Standalone: every key goes to one server.
class SingleTopology final : public RedisTopology {
 public:
  SingleTopology(const RedisAddress& address,
                 const ConnectionSettings* settings)
      : endpoint_(address, settings) {}

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

}  // namespace

// One batched operation: items (fingerprints) grouped into calls, a call
// being one command over items of one slot, and a parser for its reply.
class RedisIndex::BatchOp {
 public:
  BatchOp(bool writes, bool idempotent, size_t max_keys_per_call)
      : writes_(writes),
        idempotent_(idempotent),
        max_keys_per_call_(max_keys_per_call) {}
  virtual ~BatchOp() = default;

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

namespace {

// Per-item integers from a script's array reply.
template <typename F>
bool AcceptIntegers(absl::Span<const size_t> items, const redisReply& reply,
                    F&& take) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != items.size()) {
    return false;
  }
  for (size_t j = 0; j < items.size(); ++j) {
    const redisReply* r = reply.element[j];
    if (r->type != REDIS_REPLY_INTEGER || !take(items[j], r->integer)) {
      return false;
    }
  }
  return true;
}

// An op's entries: their keys (in keys_) and, in the bucket layout, their
// fields. `layout` nullptr: the key-per-entry layout.
class Entries {
 public:
  explicit Entries(const BucketLayout* layout) : layout_(layout) {}
  bool buckets() const { return layout_ != nullptr; }
  void Add(absl::string_view ns, absl::string_view fp,
           std::vector<std::string>* keys) {
    if (layout_ == nullptr) {
      keys->push_back(LegacyEntryKey(ns, fp));
    } else {
      keys->push_back(layout_->BucketKey(ns, fp));
      fields_.push_back(layout_->Field(fp));
    }
  }
  absl::string_view field(size_t i) const { return fields_[i]; }
  // Appends the fields of `items` (bucket layout only).
  void AddFields(absl::Span<const size_t> items, Args& args) const {
    if (layout_ == nullptr) return;
    for (size_t i : items) args.Add(fields_[i]);
  }

 private:
  const BucketLayout* layout_;
  std::vector<absl::string_view> fields_;  // into the caller's fingerprints
};

class LookupOp final : public RedisIndex::BatchOp {
 public:
  LookupOp(absl::string_view ns, absl::Span<const std::string> fingerprints,
           const BucketLayout* layout)
      : BatchOp(/*writes=*/false, /*idempotent=*/true, 1),
        found(fingerprints.size(), false),
        entries_(layout) {
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    Args args;
    args.Add(entries_.buckets() ? "HEXISTS" : "EXISTS");
    args.Add(keys_[items[0]]);
    entries_.AddFields(items, args);
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    if (reply.type != REDIS_REPLY_INTEGER) return false;
    found[items[0]] = reply.integer != 0;
    return true;
  }

  std::vector<bool> found;

 private:
  Entries entries_;
};

// What insert and release share: the optional idempotency record.
struct TokenArgs {
  TokenArgs(absl::string_view ns, char op, const WriteToken* token,
            absl::Duration ttl)
      : ns(ns),
        op(op),
        token(token),
        ttl_ms(std::to_string(absl::ToInt64Milliseconds(ttl))) {}

  // Outside a cluster item i starts a call where a string record starts.
  bool StartsCall(size_t i) const {
    return token != nullptr &&
           (token->first_position + i) % kPositionsPerRecord == 0;
  }

  absl::string_view ns;
  char op;
  const WriteToken* token;
  std::string ttl_ms;
};

// EVALSHA <script> <keys> [record] entry... <form> <ttl> <record argument>
// [extra]; see the scripts.
class ScriptCall {
 public:
  // REQUIRES: outside a cluster (slot -1), `items` are consecutive and
  // their positions lie in one string record.
  ScriptCall(ScriptId script, const TokenArgs& token,
             const std::vector<std::string>& keys,
             absl::Span<const size_t> items, int slot) {
    const WriteToken* t = token.token;
    const char* form = "0";
    if (t != nullptr) {
      if (slot < 0) {
        const uint64_t first = t->first_position + items.front();
        form = "s";
        record_ = TokenRecordKey(token.ns, token.op, t->stream_id, -1,
                                 first / kPositionsPerRecord);
        absl::StrAppend(&record_arg_, (first % kPositionsPerRecord) * 8);
      } else {
        form = "h";
        record_ = TokenRecordKey(token.ns, token.op, t->stream_id, slot, 0);
        for (size_t i : items) {
          if (!record_arg_.empty()) record_arg_.push_back(',');
          absl::StrAppend(&record_arg_, t->first_position + i);
        }
      }
    }
    num_keys_ = std::to_string(items.size() + (t != nullptr ? 1 : 0));
    args_.Add("EVALSHA");
    args_.Add(RedisScriptShas()[script]);
    args_.Add(num_keys_);
    if (t != nullptr) args_.Add(record_);
    for (size_t i : items) args_.Add(keys[i]);
    args_.Add(form);
    args_.Add(token.ttl_ms);
    args_.Add(record_arg_);
  }
  Args& args() { return args_; }

 private:
  std::string record_;
  std::string record_arg_;
  std::string num_keys_;
  Args args_;
};

class InsertOp final : public RedisIndex::BatchOp {
 public:
  InsertOp(absl::string_view ns, absl::Span<const InsertEntry> entries,
           TokenArgs token, const BucketLayout* layout,
           size_t max_keys_per_call)
      : BatchOp(/*writes=*/true, /*idempotent=*/token.token != nullptr,
                max_keys_per_call),
        results(entries.size()),
        entries_(layout),
        token_(std::move(token)) {
    keys_.reserve(entries.size());
    sizes_.reserve(entries.size());
    for (const InsertEntry& e : entries) {
      entries_.Add(ns, e.fingerprint, &keys_);
      sizes_.push_back(e.size);
    }
  }
  bool StartsCall(size_t i) const override { return token_.StartsCall(i); }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int slot) const override {
    ScriptCall call(entries_.buckets() ? kInsert : kLegacyInsert, token_,
                    keys_, items, slot);
    std::string sizes;
    sizes.reserve(items.size() * 6);
    for (size_t i : items) {
      if (!sizes.empty()) sizes.push_back(',');
      absl::StrAppend(&sizes, sizes_[i]);
    }
    call.args().Add(sizes);
    entries_.AddFields(items, call.args());
    call.args().Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    return AcceptIntegers(items, reply, [&](size_t i, long long v) {
      if (v < 2) return false;
      results[i].is_new = (v & 1) != 0;
      results[i].ref_count = static_cast<uint64_t>(v) >> 1;
      return true;
    });
  }

  std::vector<InsertResult> results;

 private:
  std::vector<uint32_t> sizes_;
  Entries entries_;
  TokenArgs token_;
};

class ReleaseOp final : public RedisIndex::BatchOp {
 public:
  ReleaseOp(absl::string_view ns, absl::Span<const std::string> fingerprints,
            TokenArgs token, const BucketLayout* layout,
            size_t max_keys_per_call)
      : BatchOp(/*writes=*/true, /*idempotent=*/token.token != nullptr,
                max_keys_per_call),
        left(fingerprints.size(), 0),
        entries_(layout),
        token_(std::move(token)) {
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
  bool StartsCall(size_t i) const override { return token_.StartsCall(i); }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int slot) const override {
    ScriptCall call(entries_.buckets() ? kRelease : kLegacyRelease, token_,
                    keys_, items, slot);
    entries_.AddFields(items, call.args());
    call.args().Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    return AcceptIntegers(items, reply, [&](size_t i, long long v) {
      if (v < 0) return false;
      left[i] = static_cast<uint64_t>(v);
      return true;
    });
  }

  std::vector<uint64_t> left;

 private:
  Entries entries_;
  TokenArgs token_;
};

// The legacy layout's fields of an entry's hints under `params_key`: its
// list and its run.
std::string HintListField(absl::string_view params_key) {
  return absl::StrCat("h:", params_key);
}
std::string HintRunField(absl::string_view params_key) {
  return absl::StrCat("r:", params_key);
}

// A run as the bucket script takes it: its length, then uvarints.
std::string EncodeRun(absl::Span<const uint32_t> run) {
  std::string out(1, static_cast<char>(run.size()));
  for (uint32_t s : run) AppendUvarint(s, &out);
  return out;
}

class RecordNextOp final : public RedisIndex::BatchOp {
 public:
  RecordNextOp(absl::string_view ns, absl::string_view params_key,
               absl::Span<const NextSize> hints, int length,
               const BucketLayout* layout, size_t max_keys_per_call)
      : BatchOp(/*writes=*/true, /*idempotent=*/true, max_keys_per_call),
        entries_(layout),
        list_field_(layout ? HintTag(params_key) : HintListField(params_key)),
        run_field_(HintRunField(params_key)),
        length_(std::to_string(length)) {
    keys_.reserve(hints.size());
    sizes_.reserve(hints.size());
    runs_.reserve(hints.size());
    for (const NextSize& h : hints) {
      entries_.Add(ns, h.fingerprint, &keys_);
      sizes_.push_back(std::to_string(h.next_size));
      const size_t run = std::min(h.run.size(), kHintRunLength);
      const absl::Span<const uint32_t> kept(h.run.data(), run);
      runs_.push_back(layout ? EncodeRun(kept) : absl::StrJoin(kept, ","));
    }
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    Args args;
    const std::string num_keys = std::to_string(items.size());
    args.Add("EVALSHA");
    args.Add(RedisScriptShas()[entries_.buckets() ? kRecordNext
                                                  : kLegacyRecordNext]);
    args.Add(num_keys);
    for (size_t i : items) args.Add(keys_[i]);
    args.Add(list_field_);  // the bucket layout: the tag
    if (!entries_.buckets()) args.Add(run_field_);
    args.Add(length_);
    entries_.AddFields(items, args);
    for (size_t i : items) args.Add(sizes_[i]);
    for (size_t i : items) args.Add(runs_[i]);
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t>, const redisReply& reply) override {
    return reply.type == REDIS_REPLY_INTEGER;
  }

 private:
  Entries entries_;
  const std::string list_field_;
  const std::string run_field_;
  const std::string length_;
  std::vector<std::string> sizes_;
  std::vector<std::string> runs_;
};

// A legacy entry's hints from HMGET's reply (list, run); false if malformed.
bool ParseLegacyHints(const redisReply& reply, NextHints* h) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2) return false;
  const redisReply& list = *reply.element[0];
  const redisReply& run = *reply.element[1];
  if (list.type == REDIS_REPLY_NIL) return true;  // the run goes with it
  if (list.type != REDIS_REPLY_STRING) return false;
  if (!ParseLegacySizes(absl::string_view(list.str, list.len), &h->sizes)) {
    return false;
  }
  if (run.type == REDIS_REPLY_NIL) return true;
  return run.type == REDIS_REPLY_STRING &&
         ParseLegacySizes(absl::string_view(run.str, run.len), &h->run);
}

// An entry's hints under `tag` from HGET's reply; false if malformed.
bool ParseBucketHints(const redisReply& reply, absl::string_view tag,
                      NextHints* h) {
  if (reply.type == REDIS_REPLY_NIL) return true;
  if (reply.type != REDIS_REPLY_STRING) return false;
  EntryValue value;
  if (!DecodeEntryValue(absl::string_view(reply.str, reply.len), &value)) {
    return false;
  }
  for (HintRecord& r : value.hints) {
    if (r.tag == tag && !r.sizes.empty()) {
      h->sizes = std::move(r.sizes);
      h->run = std::move(r.run);
      break;
    }
  }
  return true;
}

class NextHintsOp final : public RedisIndex::BatchOp {
 public:
  NextHintsOp(absl::string_view ns, absl::string_view params_key,
              absl::Span<const std::string> fingerprints,
              const BucketLayout* layout)
      : BatchOp(/*writes=*/false, /*idempotent=*/true, 1),
        hints(fingerprints.size()),
        entries_(layout),
        list_field_(layout ? HintTag(params_key) : HintListField(params_key)),
        run_field_(HintRunField(params_key)) {
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    Args args;
    if (entries_.buckets()) {
      args.Add("HGET");
      args.Add(keys_[items[0]]);
      entries_.AddFields(items, args);
    } else {
      args.Add("HMGET");
      args.Add(keys_[items[0]]);
      args.Add(list_field_);
      args.Add(run_field_);
    }
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    NextHints& h = hints[items[0]];
    h = NextHints();
    const bool ok = entries_.buckets()
                        ? ParseBucketHints(reply, list_field_, &h)
                        : ParseLegacyHints(reply, &h);
    if (!ok) return false;
    // A longer run (written by another version) is as good as its start.
    if (h.run.size() > kHintRunLength) h.run.resize(kHintRunLength);
    return true;
  }

  std::vector<NextHints> hints;

 private:
  Entries entries_;
  const std::string list_field_;  // the bucket layout: the tag
  const std::string run_field_;
};

// The redirection in an error reply "MOVED 3999 127.0.0.1:6381".
bool ParseRedirect(absl::string_view error, absl::string_view kind, int* slot,
                   absl::string_view* address) {
  if (!absl::ConsumePrefix(&error, kind)) return false;
  std::vector<absl::string_view> parts =
      absl::StrSplit(error, ' ', absl::SkipEmpty());
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], slot)) return false;
  *address = parts[1];
  return true;
}

// One command over items of one slot.
struct Call {
  std::vector<size_t> items;
  int slot = -1;
  RedisEndpoint* redirect = nullptr;  // MOVED/ASK target for the next round
  bool asking = false;
};

// Error replies that say the command did not run because the server cannot
// serve it now: a cluster without a quorum or with a slot not served
// (CLUSTERDOWN), a replica cut off from its master (MASTERDOWN) or one that
// a failover made of a master (READONLY: our scripts fail at their first
// write, before they changed anything), a server loading its data after a
// restart (LOADING), one busy with another script (BUSY).
bool ServerCannotServeNow(absl::string_view error) {
  for (absl::string_view prefix :
       {"CLUSTERDOWN", "MASTERDOWN", "READONLY", "LOADING", "BUSY"}) {
    if (absl::StartsWith(error, prefix)) return true;
  }
  return false;
}

// The calls of one round that go to one server: one pipeline.
struct Group {
  RedisEndpoint* endpoint = nullptr;
  int replicas = 0;
  std::vector<size_t> calls;
  std::optional<RedisEndpoint::Lease> lease;
  int wait = 0;  // replicas the WAIT at the end of the pipeline asks for
  bool ask_role = false;  // the pipeline ends with ROLE instead (see ReadRole)
  bool reload_scripts = false;
};

// The replicas online per the ROLE reply of a master: "master", its offset,
// then one [ip, port, offset] per replica online. 0 for any other reply (a
// replica's, or an error such as an ACL user's NOPERM).
int OnlineReplicas(const redisReply& role) {
  if (role.type != REDIS_REPLY_ARRAY || role.elements < 3) return 0;
  const redisReply& kind = *role.element[0];
  const redisReply& replicas = *role.element[2];
  if ((kind.type != REDIS_REPLY_STRING && kind.type != REDIS_REPLY_STATUS) ||
      absl::string_view(kind.str, kind.len) != "master" ||
      replicas.type != REDIS_REPLY_ARRAY) {
    return 0;
  }
  return static_cast<int>(replicas.elements);
}

// One run of a BatchOp. Its items are split into calls, then sent in
// rounds: a round groups the pending calls by server, sends every server's
// pipeline, then reads the replies; the calls redirected, to re-send or to
// retry after a failure make the next round, until none is left or the
// batch has failed. After a round with failures the next one comes at
// once, later ones after a pause, until `wait`'s deadline (the failover
// wait).
class Batch {
 public:
  Batch(RedisIndex::BatchOp& op, RedisTopology& topology,
        const IndexOptions& options, FailoverWait& wait)
      : op_(op),
        topology_(topology),
        options_(options),
        wait_(wait),
        cluster_(topology.cluster()) {}

  absl::Status Run();

 private:
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

  RedisIndex::BatchOp& op_;
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

absl::Status Batch::Run() {
  if (op_.size() == 0) return absl::OkStatus();
  if (cluster_) {
    SplitBySlot();
  } else {
    SplitConsecutive();
  }
  pending_.resize(calls_.size());
  for (size_t c = 0; c < calls_.size(); ++c) pending_[c] = c;
  while (!pending_.empty() && failure_.ok() && BeginRound()) {
    std::vector<Group> groups = GroupByServer();
    SendAll(groups);
    for (Group& g : groups) {
      if (g.lease.has_value()) ReadReplies(g);
    }
    groups.clear();  // returns the leases before the next round
    std::sort(next_.begin(), next_.end());
    next_.erase(std::unique(next_.begin(), next_.end()), next_.end());
    pending_.swap(next_);
  }
  EndWait();
  return failure_;
}

// One server: consecutive items, up to max_keys_per_call() a call.
void Batch::SplitConsecutive() {
  const size_t max_keys = op_.max_keys_per_call();
  for (size_t i = 0; i < op_.size(); ++i) {
    if (calls_.empty() || calls_.back().items.size() == max_keys ||
        op_.StartsCall(i)) {
      calls_.emplace_back();
    }
    calls_.back().items.push_back(i);
  }
}

// A cluster: the items of one slot, up to max_keys_per_call() a call.
void Batch::SplitBySlot() {
  const size_t max_keys = op_.max_keys_per_call();
  absl::flat_hash_map<int, size_t> open;  // slot -> call being filled
  for (size_t i = 0; i < op_.size(); ++i) {
    const int slot = KeySlot(op_.key(i));
    auto [it, added] = open.try_emplace(slot, calls_.size());
    if (added || calls_[it->second].items.size() == max_keys) {
      it->second = calls_.size();
      calls_.emplace_back();
      calls_.back().slot = slot;
    }
    calls_[it->second].items.push_back(i);
  }
}

// False (and the batch has failed) when the wait is over, or after one
// round of redirections too many.
bool Batch::BeginRound() {
  if (pause_) {
    pause_ = false;
    rounds_ = 0;
    if (!Pause()) return false;
  } else if (rounds_ == kMaxRounds) {
    Fail(absl::UnavailableError(absl::StrCat(
        "redis: ", pending_.size(), " commands were still redirected after ",
        kMaxRounds, " attempts (cluster resharding?)")));
    return false;
  }
  ++rounds_;
  topology_.Refresh();
  next_.clear();
  return true;
}

// Before calls that failed are sent again: at once the first time (a fresh
// connection often does it: the pooled one was stale), then after a pause,
// until the deadline. False (and the batch has failed) once it has passed
// or chunkd stopped waiting.
bool Batch::Pause() {
  if (++failed_rounds_ == 1) {
    wait_.Failed();
    deadline_ = wait_.Deadline();
    return true;
  }
  const absl::Time now = absl::Now();
  if (now >= deadline_ || wait_.stopped()) {
    Fail(WaitedInVain());
    return false;
  }
  if (!waiting_) {
    waiting_ = true;
    waiting_since_ = now;
    wait_.Begin(retry_why_);
  }
  const bool go_on = wait_.Sleep(std::min(pause_length_, deadline_ - now));
  pause_length_ = std::min(2 * pause_length_, kMaxPause);
  if (!go_on) {
    Fail(WaitedInVain());
    return false;
  }
  return true;
}

// The last failure, and why the call does not wait any longer.
absl::Status Batch::WaitedInVain() const {
  if (wait_.bound() == absl::ZeroDuration()) return retry_why_;
  return absl::Status(
      retry_why_.code(),
      absl::StrCat(retry_why_.message(),
                   wait_.stopped()
                       ? " (no more waiting for redis to come back: chunkd "
                         "is stopping)"
                       : absl::StrCat(" (redis did not come back within the "
                                      "failover wait of ",
                                      absl::FormatDuration(wait_.bound()),
                                      ", --redis_failover_wait)")));
}

// What the batch tells the wait: whether it waited and how that ended, and
// whether Redis answered.
void Batch::EndWait() {
  if (waiting_) wait_.End(failure_.ok(), absl::Now() - waiting_since_);
  if (absl::IsUnavailable(failure_)) {
    wait_.Failed();
  } else {
    wait_.Answered();
  }
}

// The pending calls by server; a call nobody serves is retried or fails.
std::vector<Group> Batch::GroupByServer() {
  std::vector<Group> groups;
  for (size_t c : pending_) {
    RedisRoute route;
    if (calls_[c].redirect != nullptr) {
      route.endpoint = calls_[c].redirect;
    } else {
      route = topology_.Route(calls_[c].slot);
      if (route.endpoint == nullptr) {
        // A slot without a master: the map is reloaded next round.
        RetryOrFail(c, topology_.NoRoute(calls_[c].slot), /*sent=*/false);
        continue;
      }
    }
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.endpoint == route.endpoint;
    });
    if (g == groups.end()) {
      groups.emplace_back();
      g = groups.end() - 1;
      g->endpoint = route.endpoint;
    }
    g->replicas = std::max(g->replicas, route.replicas);
    g->calls.push_back(c);
  }
  return groups;
}

// Sends every group's pipeline before reading any reply, so that the
// servers work in parallel. Leases are taken in one global order (by
// endpoint) so that batches holding several never wait in a cycle.
void Batch::SendAll(std::vector<Group>& groups) {
  std::vector<size_t> order(groups.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::less<RedisEndpoint*>()(groups[a].endpoint, groups[b].endpoint);
  });
  for (size_t k : order) Send(groups[k]);
}

// Writes the pipeline of `g`; g.lease is set when it was sent.
void Batch::Send(Group& g) {
  auto lease = g.endpoint->Acquire();
  if (!lease.ok()) {
    topology_.NodeFailed(g.endpoint);
    for (size_t c : g.calls) RetryOrFail(c, lease.status(), /*sent=*/false);
    return;
  }
  redisContext* context = lease->context();
  for (size_t c : g.calls) {
    if (calls_[c].asking) {
      const char* asking = "ASKING";
      const size_t asking_len = 6;
      RedisAppend(context, 1, &asking, &asking_len);
    }
    op_.Append(context, calls_[c].items, calls_[c].slot);
  }
  AppendWait(g, context);
  if (!RedisFlush(context)) {
    lease->MarkBroken();
    topology_.NodeFailed(g.endpoint);
    const absl::Status status = g.endpoint->ContextError(context);
    for (size_t c : g.calls) RetryOrFail(c, status, /*sent=*/true);
    return;
  }
  g.lease.emplace(*std::move(lease));
}

// Writes in a cluster end the pipeline with WAIT for the master's replicas,
// or, to a master with none in the slot map, with ROLE: a replica can come
// back (the old master rejoining the new one after a failover) without a
// MOVED or a failure that would reload the map.
void Batch::AppendWait(Group& g, redisContext* context) {
  if (!cluster_ || !op_.writes() || options_.cluster_wait_replicas <= 0) {
    return;
  }
  if (g.replicas <= 0) {
    const char* role = "ROLE";
    const size_t role_len = 4;
    RedisAppend(context, 1, &role, &role_len);
    g.ask_role = true;
    return;
  }
  AppendWaitFor(g, context,
                std::min(options_.cluster_wait_replicas, g.replicas));
}

// Appends WAIT for `count` replicas (cluster_wait_timeout).
void Batch::AppendWaitFor(Group& g, redisContext* context, int count) {
  g.wait = count;
  const std::string replicas = std::to_string(g.wait);
  const std::string timeout =
      std::to_string(absl::ToInt64Milliseconds(options_.cluster_wait_timeout));
  const char* argv[] = {"WAIT", replicas.c_str(), timeout.c_str()};
  const size_t argv_len[] = {4, replicas.size(), timeout.size()};
  RedisAppend(context, 3, argv, argv_len);
}

// Reads the replies of the pipeline of `g`, its WAIT's included, and
// reloads the scripts after NOSCRIPT.
void Batch::ReadReplies(Group& g) {
  redisContext* context = g.lease->context();
  absl::Status broken;
  for (size_t c : g.calls) {
    if (!broken.ok()) {
      RetryOrFail(c, broken, /*sent=*/true);
      continue;
    }
    broken = ReadReply(g, context, c);
  }
  if (broken.ok() && g.ask_role) broken = ReadRole(g, context);
  if (broken.ok() && g.wait > 0) broken = ReadWait(g, context);
  if (broken.ok() && g.reload_scripts) {
    absl::Status loaded = g.endpoint->LoadScripts(context);
    if (!loaded.ok()) {
      // Re-sending would meet NOSCRIPT again.
      Fail(loaded);
      broken = loaded;
    }
  }
  if (!broken.ok()) {
    g.lease->MarkBroken();
    topology_.NodeFailed(g.endpoint);
  }
}

// Reads the reply of call c (after ASKING's, if sent); not OK when the
// connection broke.
absl::Status Batch::ReadReply(Group& g, redisContext* context, size_t c) {
  if (calls_[c].asking && RedisReadReply(context) == nullptr) {
    return Broke(g, context, c);
  }
  ReplyPtr reply = RedisReadReply(context);
  if (reply == nullptr) return Broke(g, context, c);
  if (reply->type != REDIS_REPLY_ERROR) {
    if (!op_.Accept(calls_[c].items, *reply)) {
      Fail(absl::InternalError(
          absl::StrCat("redis at ", g.endpoint->name(),
                       " sent an unexpected reply of type ", reply->type)));
    }
    return absl::OkStatus();
  }
  OnError(g, c, absl::string_view(reply->str, reply->len));
  return absl::OkStatus();
}

// The connection broke while reading call c's reply.
absl::Status Batch::Broke(Group& g, redisContext* context, size_t c) {
  absl::Status broken = g.endpoint->ContextError(context);
  RetryOrFail(c, broken, /*sent=*/true);
  return broken;
}

// Call c got the error reply `error`.
void Batch::OnError(Group& g, size_t c, absl::string_view error) {
  int slot = -1;
  absl::string_view address;
  if (ParseRedirect(error, "MOVED ", &slot, &address) ||
      ParseRedirect(error, "ASK ", &slot, &address)) {
    Redirect(g, c, error, slot, address);
  } else if (absl::StartsWith(error, "NOSCRIPT")) {
    g.reload_scripts = true;
    Resend(c);
  } else if (absl::StartsWith(error, "TRYAGAIN")) {
    // A multi-key call met a slot in migration: nothing ran. One call per
    // key after a pause lets each go where it is.
    SplitIntoSingles(c);
    RetryOrFail(c, g.endpoint->ReplyError(error), /*sent=*/false);
  } else if (IsOutOfMemoryReply(error)) {
    // Nothing of the call ran (see admit in the scripts).
    Fail(g.endpoint->OutOfMemory(error));
  } else if (ServerCannotServeNow(error)) {
    // Nothing ran; a failover may be under way: reload the map and wait.
    topology_.NodeFailed(g.endpoint);
    RetryOrFail(c, g.endpoint->ReplyError(error), /*sent=*/false);
  } else {
    Fail(g.endpoint->ReplyError(error));
  }
}

// MOVED or ASK: call c goes to the server named, next round (nothing ran:
// safe to re-send).
void Batch::Redirect(Group& g, size_t c, absl::string_view error, int slot,
                     absl::string_view address) {
  const bool moved = absl::StartsWith(error, "MOVED");
  RedisEndpoint* to = topology_.Redirect(slot, address, moved, g.endpoint);
  if (to == nullptr) {
    Fail(g.endpoint->ReplyError(error));
    return;
  }
  calls_[c].redirect = to;
  calls_[c].asking = !moved;
  next_.push_back(c);
}

// After TRYAGAIN some of call c's keys have moved and some not: one call
// per key lets each go where it is. Call c keeps its first item.
void Batch::SplitIntoSingles(size_t c) {
  const std::vector<size_t> rest(calls_[c].items.begin() + 1,
                                 calls_[c].items.end());
  const int slot = calls_[c].slot;
  calls_[c].items.resize(1);
  for (size_t item : rest) {
    next_.push_back(calls_.size());
    Call single;
    single.items = {item};
    single.slot = slot;
    calls_.push_back(std::move(single));
  }
}

// Reads the ROLE reply of a master the slot map knows no replica of. When
// it has some online, the map is behind: it learns them, and this batch
// waits for them as the next ones will, with a WAIT of its own (one more
// round trip). Not OK when the connection broke.
absl::Status Batch::ReadRole(Group& g, redisContext* context) {
  ReplyPtr role = RedisReadReply(context);
  if (role != nullptr) {
    const int online = OnlineReplicas(*role);
    if (online == 0) return absl::OkStatus();
    topology_.ReplicasOnline(g.endpoint, online);
    AppendWaitFor(g, context,
                  std::min(options_.cluster_wait_replicas, online));
    if (RedisFlush(context)) return absl::OkStatus();
  }
  absl::Status broken = g.endpoint->ContextError(context);
  for (size_t c : g.calls) RetryOrFail(c, broken, /*sent=*/true);
  return broken;
}

// Reads the WAIT's reply; not OK when the connection broke.
absl::Status Batch::ReadWait(Group& g, redisContext* context) {
  ReplyPtr acks = RedisReadReply(context);
  if (acks == nullptr) {
    absl::Status broken = g.endpoint->ContextError(context);
    for (size_t c : g.calls) RetryOrFail(c, broken, /*sent=*/true);
    return broken;
  }
  if (acks->type != REDIS_REPLY_INTEGER || acks->integer < g.wait) {
    // Applied on the master only: a failover now (or one under way, that
    // demoted this master without its knowing yet) would lose it. The
    // outcome is unknown to the caller, as after a broken connection.
    const absl::Status unconfirmed = absl::UnavailableError(absl::StrCat(
        "redis at ", g.endpoint->name(), ": writes not confirmed by ", g.wait,
        " replica(s) within ",
        absl::FormatDuration(options_.cluster_wait_timeout),
        " (failover under way?)"));
    for (size_t c : g.calls) RetryOrFail(c, unconfirmed, /*sent=*/true);
  }
  return absl::OkStatus();
}

// Nothing of call c ran: it is re-sent next round, routed afresh.
void Batch::Resend(size_t c) {
  calls_[c].redirect = nullptr;
  calls_[c].asking = false;
  next_.push_back(c);
}

// Call c failed with `status`; `sent` when the server may have run it. A
// call is sent again, after a pause and within the wait, when that is
// safe: it did not run, or running it twice does no harm.
void Batch::RetryOrFail(size_t c, absl::Status status, bool sent) {
  Call& call = calls_[c];
  call.redirect = nullptr;
  call.asking = false;
  if (sent && !op_.idempotent()) {
    Fail(absl::Status(
        status.code(),
        absl::StrCat(status.message(),
                     " (the write may have been applied; without a write "
                     "token it is not sent again)")));
    return;
  }
  retry_why_ = std::move(status);
  pause_ = true;
  next_.push_back(c);
}

// The batch fails with the first failure.
void Batch::Fail(absl::Status status) {
  if (failure_.ok()) failure_ = std::move(status);
}

// Commands, each on the key args[1], their replies kept.
class CommandsOp final : public RedisIndex::BatchOp {
 public:
  CommandsOp(const std::vector<std::vector<std::string>>& commands,
             bool writes)
      : BatchOp(writes, /*idempotent=*/true, 1),
        replies(commands.size()),
        commands_(commands) {
    keys_.reserve(commands.size());
    for (const auto& c : commands) {
      // EVAL <script> <numkeys> <key>: its key; any other: its first word.
      const size_t at = !c.empty() && c[0] == "EVAL" ? 3 : 1;
      keys_.push_back(c.size() > at ? c[at] : "");
    }
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    Args args;
    for (const std::string& a : commands_[items[0]]) args.Add(a);
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    RedisIndex::CommandReply& r = replies[items[0]];
    r = RedisIndex::CommandReply();
    switch (reply.type) {
      case REDIS_REPLY_INTEGER:
        r.integer = reply.integer;
        return true;
      case REDIS_REPLY_NIL:
        r.nil = true;
        return true;
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
        r.strings.emplace_back(reply.str, reply.len);
        return true;
      case REDIS_REPLY_ARRAY:
        for (size_t i = 0; i < reply.elements; ++i) {
          const redisReply* e = reply.element[i];
          if (e->type != REDIS_REPLY_STRING) return false;
          r.strings.emplace_back(e->str, e->len);
        }
        return true;
      default:
        return false;
    }
  }

  std::vector<RedisIndex::CommandReply> replies;

 private:
  const std::vector<std::vector<std::string>>& commands_;
};

// SCAN calls per master when looking for keys of the layout before
// buckets: 1000 keys each, so a database of up to a million other keys is
// searched whole.
constexpr int kMaxLegacyScans = 1000;

// A SCAN reply's cursor and whether it found keys; false if malformed.
bool ParseScan(const redisReply& reply, std::string* cursor, bool* found) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 ||
      reply.element[0]->type != REDIS_REPLY_STRING ||
      reply.element[1]->type != REDIS_REPLY_ARRAY) {
    return false;
  }
  cursor->assign(reply.element[0]->str, reply.element[0]->len);
  *found = reply.element[1]->elements > 0;
  return true;
}

bool IsMigrating(const absl::Status& status) {
  return absl::IsUnavailable(status) &&
         absl::StrContains(status.message(), "being moved");
}

absl::Status RefuseLegacyLayout(absl::string_view server) {
  return absl::FailedPreconditionError(absl::StrCat(
      "redis at ", server,
      " holds index entries in the key-per-entry layout of chunkd 0.3 and "
      "before (keys chunkd:<namespace>:<fingerprint>); this chunkd keeps "
      "them in buckets: stop every chunkd that uses this redis and run `",
      kMigrateCommand,
      " --index=<this --index value>` (docs/operations.md, \"Moving an "
      "index to the bucket layout\")"));
}

absl::Status FindLegacyKeysOn(RedisEndpoint& endpoint) {
  auto lease = endpoint.Acquire();
  if (!lease.ok()) return lease.status();
  std::string cursor = "0";
  for (int i = 0; i < kMaxLegacyScans; ++i) {
    ReplyPtr reply = RedisCommand(
        lease->context(),
        {"SCAN", cursor, "MATCH", kLegacyKeyPattern, "COUNT", "1000"});
    if (reply == nullptr) {
      lease->MarkBroken();
      return endpoint.ContextError(lease->context());
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      return endpoint.ReplyError(absl::string_view(reply->str, reply->len));
    }
    bool found = false;
    if (!ParseScan(*reply, &cursor, &found)) {
      return endpoint.ReplyError("unexpected reply to SCAN");
    }
    if (found) return RefuseLegacyLayout(endpoint.name());
    if (cursor == "0") break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MigratingStatus() {
  return absl::UnavailableError(absl::StrCat(
      "the redis index is being moved to another layout or bucket_bits (key ",
      kLayoutKey, " says migrating); index calls go on once `",
      kMigrateCommand, "` has finished (run it again to resume it)"));
}

const std::vector<std::string>& RedisIndex::Scripts() {
  return RedisScripts();
}

RedisIndex::RedisIndex(RedisConfig config)
    : config_(std::move(config)),
      wait_(config_.options.failover_wait, config_.options.on_wait,
            config_.options.warn) {
  settings_.username = config_.username;
  settings_.password = config_.password;
  settings_.db = config_.db;
  settings_.connect_timeout = config_.options.connect_timeout;
  settings_.command_timeout = config_.options.command_timeout;
  settings_.pool_size = config_.options.pool_size;
  settings_.reconnect_backoff_min = config_.options.reconnect_backoff_min;
  settings_.reconnect_backoff_max = config_.options.reconnect_backoff_max;
  settings_.scripts = Scripts();
  settings_.check_listpack = !config_.legacy_layout;
  settings_.warn = config_.options.warn;
  if (config_.cluster) {
    topology_ = std::make_unique<ClusterTopology>(config_.servers, &settings_);
  } else {
    topology_ =
        std::make_unique<SingleTopology>(config_.servers.front(), &settings_);
  }
}

RedisIndex::~RedisIndex() = default;

absl::string_view RedisIndex::backend() const {
  return config_.cluster ? "redis-cluster" : "redis";
}

absl::Status RedisIndex::Health() {
  absl::Status health = topology_->Health();
  if (health.ok() && !config_.legacy_layout) health = RecheckLayout();
  // The probe runs every second: it dates the start of an outage even when
  // no call comes.
  if (absl::IsUnavailable(health)) {
    wait_.Failed();
  } else {
    wait_.Answered();
  }
  return health;
}

void RedisIndex::StopWaiting() { wait_.Stop(); }

std::optional<FingerprintIndex::WaitCounts> RedisIndex::FailoverWaits() {
  const FailoverWait::Counts c = wait_.counts();
  return WaitCounts{c.waiting, c.recovered, c.expired};
}

absl::Status RedisIndex::Run(BatchOp& op) { return Run(op, wait_); }

absl::Status RedisIndex::Run(BatchOp& op, FailoverWait& wait) {
  return Batch(op, *topology_, config_.options, wait).Run();
}

absl::StatusOr<std::vector<RedisIndex::CommandReply>> RedisIndex::Commands(
    const std::vector<std::vector<std::string>>& commands, bool writes) {
  return Commands(commands, writes, wait_);
}

absl::StatusOr<std::vector<RedisIndex::CommandReply>> RedisIndex::Commands(
    const std::vector<std::vector<std::string>>& commands, bool writes,
    FailoverWait& wait) {
  CommandsOp op(commands, writes);
  if (absl::Status s = Run(op, wait); !s.ok()) return s;
  return std::move(op.replies);
}

absl::StatusOr<std::vector<RedisEndpoint*>> RedisIndex::Masters() {
  return topology_->Masters(/*complete=*/true);
}

absl::Status RedisIndex::Layout(FailoverWait& wait, LayoutPtr* layout) {
  layout->reset();
  if (config_.legacy_layout) return absl::OkStatus();
  int loaded = 0;  // the bucket_bits this call read
  {
    std::lock_guard<std::mutex> lock(layout_mu_);
    if (!refusal_.ok()) return refusal_;
    if (layout_ == nullptr) {
      // Under the lock: calls wait for the first load rather than repeat it.
      absl::StatusOr<int> bits = LoadLayout(wait, /*first=*/true);
      if (!bits.ok()) return bits.status();
      layout_ = std::make_shared<const BucketLayout>(*bits);
      loaded = *bits;
    }
    *layout = layout_;
  }
  const int asked = config_.options.redis_bucket_bits;
  if (loaded > 0 && asked > 0 && asked != loaded && config_.options.warn) {
    config_.options.warn(absl::StrCat(
        "WARNING: the redis index has bucket_bits ", loaded, " (key ",
        kLayoutKey, "), not the ", asked, " asked for; it keeps its own (`",
        kMigrateCommand, " --bucket-bits N` changes it)"));
  }
  return absl::OkStatus();
}

// Every health probe reads the layout key again: a migration that starts
// stops index calls within a probe's interval, and they go on, with the
// new bucket_bits, once it has finished.
absl::Status RedisIndex::RecheckLayout() {
  FailoverWait no_wait(absl::ZeroDuration(), nullptr, nullptr);
  bool loaded = false;
  {
    std::lock_guard<std::mutex> lock(layout_mu_);
    loaded = layout_ != nullptr || !refusal_.ok();
  }
  if (!loaded) {
    LayoutPtr layout;
    return Layout(no_wait, &layout);
  }
  absl::StatusOr<int> bits = LoadLayout(no_wait, /*first=*/false);
  if (!bits.ok() && !absl::IsFailedPrecondition(bits.status()) &&
      !IsMigrating(bits.status())) {
    return bits.status();  // Redis did not answer: the calls will tell
  }
  bool changed = false;
  {
    std::lock_guard<std::mutex> lock(layout_mu_);
    refusal_ = bits.status();
    if (bits.ok() && (layout_ == nullptr || layout_->bits() != *bits)) {
      layout_ = std::make_shared<const BucketLayout>(*bits);
      changed = true;
    }
  }
  if (changed && config_.options.warn) {
    config_.options.warn(absl::StrCat("redis index: bucket_bits is ", *bits,
                                      " from now on (key ", kLayoutKey, ")"));
  }
  return bits.status();
}

// Refuses a database that holds keys of the layout before buckets. The
// masters that do not answer are passed over (a namespace spreads over
// every master: the others tell); UNAVAILABLE when none answers.
absl::Status RedisIndex::FindLegacyKeys() {
  absl::StatusOr<std::vector<RedisEndpoint*>> masters =
      topology_->Masters(/*complete=*/false);
  if (!masters.ok()) return masters.status();
  absl::Status unanswered = absl::UnavailableError("redis: no master known");
  for (RedisEndpoint* master : *masters) {
    absl::Status s = FindLegacyKeysOn(*master);
    if (s.ok()) {
      unanswered = absl::OkStatus();
    } else if (!absl::IsUnavailable(s)) {
      return s;
    } else if (!unanswered.ok()) {
      unanswered = s;
    }
  }
  return unanswered;
}

absl::StatusOr<LayoutRecord> RedisIndex::ReadLayoutRecord(FailoverWait& wait) {
  auto replies = Commands({{"HGETALL", kLayoutKey}}, /*writes=*/false, wait);
  if (!replies.ok()) return replies.status();
  return ParseLayoutRecord((*replies)[0].strings);
}

// The database's bucket bits from its layout key; a database without one
// gets one, unless it holds keys of the layout before buckets.
absl::StatusOr<int> RedisIndex::LoadLayout(FailoverWait& wait, bool first) {
  absl::StatusOr<LayoutRecord> record = ReadLayoutRecord(wait);
  if (!record.ok()) return record.status();
  if (record->version == 0) {
    if (absl::Status s = FindLegacyKeys(); !s.ok()) return s;
    int wanted = config_.options.redis_bucket_bits > 0
                     ? config_.options.redis_bucket_bits
                     : kDefaultBucketBits;
    if (!first) {
      // The key went missing under a running chunkd: its buckets stay.
      std::lock_guard<std::mutex> lock(layout_mu_);
      if (layout_ != nullptr) wanted = layout_->bits();
    }
    // Two chunkd starting at once: the first bucket_bits written wins.
    auto set = Commands({{"HSETNX", kLayoutKey, "bucket_bits",
                          std::to_string(wanted)},
                         {"HSETNX", kLayoutKey, "version",
                          std::to_string(kLayoutVersion)}},
                        /*writes=*/true, wait);
    if (!set.ok()) return set.status();
    record = ReadLayoutRecord(wait);
    if (!record.ok()) return record.status();
  }
  if (absl::Status s = CheckLayoutRecord(*record); !s.ok()) return s;
  return record->bucket_bits;
}

absl::Status RedisIndex::CheckLayoutRecord(const LayoutRecord& record) const {
  if (record.migrating) return MigratingStatus();
  if (record.version != kLayoutVersion || record.bucket_bits == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the redis index has layout version ", record.version,
        record.bucket_bits == 0 ? " without bucket_bits" : "", " (key ",
        kLayoutKey, "); this chunkd reads version ", kLayoutVersion, " only"));
  }
  return absl::OkStatus();
}

// The layout, and every fingerprint checked against it.
absl::Status RedisIndex::Prepare(absl::string_view ns, LayoutPtr* layout,
                                 absl::Span<const std::string> fingerprints) {
  if (absl::Status s = ValidateNamespace(ns); !s.ok()) return s;
  if (absl::Status s = Layout(wait_, layout); !s.ok()) return s;
  if (*layout == nullptr) return absl::OkStatus();
  for (const std::string& fp : fingerprints) {
    if (absl::Status s = (*layout)->ValidFingerprint(fp); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> RedisIndex::Lookup(
    absl::string_view ns, absl::Span<const std::string> fingerprints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  LookupOp op(ns, fingerprints, layout.get());
  if (absl::Status s = Run(op); !s.ok()) return s;
  return std::move(op.found);
}

absl::StatusOr<std::vector<InsertResult>> RedisIndex::Insert(
    absl::string_view ns, absl::Span<const InsertEntry> entries,
    const WriteToken* token) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, {}); !s.ok()) return s;
  if (layout != nullptr) {
    for (const InsertEntry& e : entries) {
      if (absl::Status s = layout->ValidFingerprint(e.fingerprint); !s.ok()) {
        return s;
      }
    }
  }
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  InsertOp op(ns, entries, TokenArgs(ns, 'i', token, config_.options.token_ttl),
              layout.get(), kMaxKeysPerCall);
  if (absl::Status s = Run(op); !s.ok()) return s;
  return std::move(op.results);
}

absl::StatusOr<std::vector<uint64_t>> RedisIndex::Release(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  if (token != nullptr) {
    if (absl::Status s = ValidateWriteToken(*token); !s.ok()) return s;
  }
  ReleaseOp op(ns, fingerprints,
               TokenArgs(ns, 'r', token, config_.options.token_ttl),
               layout.get(), kMaxKeysPerCall);
  if (absl::Status s = Run(op); !s.ok()) return s;
  return std::move(op.left);
}

absl::Status RedisIndex::RecordNextSizes(absl::string_view ns,
                                         absl::string_view params_key,
                                         absl::Span<const NextSize> hints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, {}); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  if (layout != nullptr) {
    for (const NextSize& h : hints) {
      if (absl::Status s = layout->ValidFingerprint(h.fingerprint); !s.ok()) {
        return s;
      }
    }
  }
  RecordNextOp op(ns, params_key, hints, config_.options.next_sizes_length,
                  layout.get(), kMaxKeysPerCall);
  return Run(op);
}

absl::StatusOr<std::vector<NextHints>> RedisIndex::NextHintsOf(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints) {
  LayoutPtr layout;
  if (absl::Status s = Prepare(ns, &layout, fingerprints); !s.ok()) return s;
  if (absl::Status s = ValidateParamsKey(params_key); !s.ok()) return s;
  NextHintsOp op(ns, params_key, fingerprints, layout.get());
  if (absl::Status s = Run(op); !s.ok()) return s;
  return std::move(op.hints);
}

absl::StatusOr<std::unique_ptr<FingerprintIndex>> CreateRedisIndex(
    RedisConfig config) {
  auto index = std::make_unique<RedisIndex>(std::move(config));
  // A database of another layout stops chunkd at start; one that does not
  // answer yet is asked again at the first call or health probe.
  FailoverWait no_wait(absl::ZeroDuration(), nullptr, nullptr);
  RedisIndex::LayoutPtr layout;
  absl::Status layout_status = index->Layout(no_wait, &layout);
  if (absl::IsFailedPrecondition(layout_status)) return layout_status;
  return index;
}

}  // namespace chunkd::index
