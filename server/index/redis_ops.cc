// The write operations of redis_ops.h: Insert, Release (with their
// write-token records) and RecordNextSizes, each a call of its script.
#include "index/redis_ops.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "index/redis_cluster.h"
#include "index/redis_entries.h"
#include "index/redis_scripts.h"

namespace chunkd::index {
namespace {

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
  RedisArgs& args() { return args_; }

 private:
  std::string record_;
  std::string record_arg_;
  std::string num_keys_;
  RedisArgs args_;
};

// What Insert and Release share: script calls of up to kMaxKeysPerCall
// entries, with the token's record when there is one (then idempotent).
class TokenScriptBatch : public RedisBatchOp {
 public:
  TokenScriptBatch(const BucketLayout* layout, TokenArgs token)
      : RedisBatchOp(/*writes=*/true, /*idempotent=*/token.token != nullptr,
                     kMaxKeysPerCall),
        entries_(layout),
        token_(std::move(token)) {}
  bool StartsCall(size_t i) const override { return token_.StartsCall(i); }

 protected:
  RedisEntries entries_;
  TokenArgs token_;
};

class InsertBatch final : public TokenScriptBatch {
 public:
  InsertBatch(absl::string_view ns, absl::Span<const InsertEntry> entries,
              TokenArgs token, const BucketLayout* layout,
              std::vector<InsertResult>* results)
      : TokenScriptBatch(layout, std::move(token)), results_(results) {
    results_->assign(entries.size(), InsertResult());
    keys_.reserve(entries.size());
    sizes_.reserve(entries.size());
    for (const InsertEntry& e : entries) {
      entries_.Add(ns, e.fingerprint, &keys_);
      sizes_.push_back(e.size);
    }
  }
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
      (*results_)[i].is_new = (v & 1) != 0;
      (*results_)[i].ref_count = static_cast<uint64_t>(v) >> 1;
      return true;
    });
  }

 private:
  std::vector<InsertResult>* results_;
  std::vector<uint32_t> sizes_;
};

class ReleaseBatch final : public TokenScriptBatch {
 public:
  ReleaseBatch(absl::string_view ns,
               absl::Span<const std::string> fingerprints, TokenArgs token,
               const BucketLayout* layout, std::vector<uint64_t>* left)
      : TokenScriptBatch(layout, std::move(token)), left_(left) {
    left_->assign(fingerprints.size(), 0);
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
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
      (*left_)[i] = static_cast<uint64_t>(v);
      return true;
    });
  }

 private:
  std::vector<uint64_t>* left_;
};

// A run as the bucket script takes it: its length, then uvarints.
std::string EncodeRun(absl::Span<const uint32_t> run) {
  std::string out(1, static_cast<char>(run.size()));
  for (uint32_t s : run) AppendUvarint(s, &out);
  return out;
}

class RecordNextBatch final : public RedisBatchOp {
 public:
  RecordNextBatch(absl::string_view ns, absl::string_view params_key,
                  absl::Span<const NextSize> hints, int length,
                  const BucketLayout* layout)
      : RedisBatchOp(/*writes=*/true, /*idempotent=*/true, kMaxKeysPerCall),
        entries_(layout),
        list_field_(layout ? HintTag(params_key)
                           : LegacyHintListField(params_key)),
        run_field_(LegacyHintRunField(params_key)),
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
    RedisArgs args;
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
  RedisEntries entries_;
  const std::string list_field_;
  const std::string run_field_;
  const std::string length_;
  std::vector<std::string> sizes_;
  std::vector<std::string> runs_;
};


}  // namespace

std::unique_ptr<RedisBatchOp> InsertOp(absl::string_view ns,
                                       absl::Span<const InsertEntry> entries,
                                       const WriteToken* token,
                                       absl::Duration token_ttl,
                                       const BucketLayout* layout,
                                       std::vector<InsertResult>* results) {
  return std::make_unique<InsertBatch>(
      ns, entries, TokenArgs(ns, 'i', token, token_ttl), layout, results);
}

std::unique_ptr<RedisBatchOp> ReleaseOp(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token, absl::Duration token_ttl,
    const BucketLayout* layout, std::vector<uint64_t>* left) {
  return std::make_unique<ReleaseBatch>(
      ns, fingerprints, TokenArgs(ns, 'r', token, token_ttl), layout, left);
}

std::unique_ptr<RedisBatchOp> RecordNextOp(absl::string_view ns,
                                           absl::string_view params_key,
                                           absl::Span<const NextSize> hints,
                                           int length,
                                           const BucketLayout* layout) {
  return std::make_unique<RecordNextBatch>(ns, params_key, hints, length,
                                           layout);
}


}  // namespace chunkd::index
