#include "index/redis_ops.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "index/redis_cluster.h"
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
  void AddFields(absl::Span<const size_t> items, RedisArgs& args) const {
    if (layout_ == nullptr) return;
    for (size_t i : items) args.Add(fields_[i]);
  }

 private:
  const BucketLayout* layout_;
  std::vector<absl::string_view> fields_;  // into the caller's fingerprints
};

class LookupBatch final : public RedisBatchOp {
 public:
  LookupBatch(absl::string_view ns, absl::Span<const std::string> fingerprints,
           const BucketLayout* layout, std::vector<bool>* found)
      : RedisBatchOp(/*writes=*/false, /*idempotent=*/true, 1),
        found_(found),
        entries_(layout) {
    found_->assign(fingerprints.size(), false);
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    RedisArgs args;
    args.Add(entries_.buckets() ? "HEXISTS" : "EXISTS");
    args.Add(keys_[items[0]]);
    entries_.AddFields(items, args);
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    if (reply.type != REDIS_REPLY_INTEGER) return false;
    (*found_)[items[0]] = reply.integer != 0;
    return true;
  }

 private:
  std::vector<bool>* found_;
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
  RedisArgs& args() { return args_; }

 private:
  std::string record_;
  std::string record_arg_;
  std::string num_keys_;
  RedisArgs args_;
};

class InsertBatch final : public RedisBatchOp {
 public:
  InsertBatch(absl::string_view ns, absl::Span<const InsertEntry> entries,
           TokenArgs token, const BucketLayout* layout,
           std::vector<InsertResult>* results)
      : RedisBatchOp(/*writes=*/true, /*idempotent=*/token.token != nullptr,
                     kMaxKeysPerCall),
        results_(results),
        entries_(layout),
        token_(std::move(token)) {
    results_->assign(entries.size(), InsertResult());
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
      (*results_)[i].is_new = (v & 1) != 0;
      (*results_)[i].ref_count = static_cast<uint64_t>(v) >> 1;
      return true;
    });
  }

 private:
  std::vector<InsertResult>* results_;
  std::vector<uint32_t> sizes_;
  Entries entries_;
  TokenArgs token_;
};

class ReleaseBatch final : public RedisBatchOp {
 public:
  ReleaseBatch(absl::string_view ns, absl::Span<const std::string> fingerprints,
            TokenArgs token, const BucketLayout* layout,
            std::vector<uint64_t>* left)
      : RedisBatchOp(/*writes=*/true, /*idempotent=*/token.token != nullptr,
                     kMaxKeysPerCall),
        left_(left),
        entries_(layout),
        token_(std::move(token)) {
    left_->assign(fingerprints.size(), 0);
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
      (*left_)[i] = static_cast<uint64_t>(v);
      return true;
    });
  }

 private:
  std::vector<uint64_t>* left_;
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

class RecordNextBatch final : public RedisBatchOp {
 public:
  RecordNextBatch(absl::string_view ns, absl::string_view params_key,
               absl::Span<const NextSize> hints, int length,
               const BucketLayout* layout)
      : RedisBatchOp(/*writes=*/true, /*idempotent=*/true, kMaxKeysPerCall),
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

class NextHintsBatch final : public RedisBatchOp {
 public:
  NextHintsBatch(absl::string_view ns, absl::string_view params_key,
              absl::Span<const std::string> fingerprints,
              const BucketLayout* layout, std::vector<NextHints>* hints)
      : RedisBatchOp(/*writes=*/false, /*idempotent=*/true, 1),
        hints_(hints),
        entries_(layout),
        list_field_(layout ? HintTag(params_key) : HintListField(params_key)),
        run_field_(HintRunField(params_key)) {
    hints_->assign(fingerprints.size(), NextHints());
    keys_.reserve(fingerprints.size());
    for (const std::string& fp : fingerprints) entries_.Add(ns, fp, &keys_);
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    RedisArgs args;
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
    NextHints& h = (*hints_)[items[0]];
    h = NextHints();
    const bool ok = entries_.buckets()
                        ? ParseBucketHints(reply, list_field_, &h)
                        : ParseLegacyHints(reply, &h);
    if (!ok) return false;
    // A longer run (written by another version) is as good as its start.
    if (h.run.size() > kHintRunLength) h.run.resize(kHintRunLength);
    return true;
  }

 private:
  std::vector<NextHints>* hints_;
  Entries entries_;
  const std::string list_field_;  // the bucket layout: the tag
  const std::string run_field_;
};


// Commands, each on the key args[1], their replies kept.
class CommandsBatch final : public RedisBatchOp {
 public:
  CommandsBatch(const std::vector<std::vector<std::string>>& commands,
             bool writes, std::vector<RedisCommandReply>* replies)
      : RedisBatchOp(writes, /*idempotent=*/true, 1),
        replies_(replies),
        commands_(commands) {
    replies_->assign(commands.size(), RedisCommandReply());
    keys_.reserve(commands.size());
    for (const auto& c : commands) {
      // EVAL <script> <numkeys> <key>: its key; any other: its first word.
      const size_t at = !c.empty() && c[0] == "EVAL" ? 3 : 1;
      keys_.push_back(c.size() > at ? c[at] : "");
    }
  }
  void Append(redisContext* context, absl::Span<const size_t> items,
              int) const override {
    RedisArgs args;
    for (const std::string& a : commands_[items[0]]) args.Add(a);
    args.Append(context);
  }
  bool Accept(absl::Span<const size_t> items,
              const redisReply& reply) override {
    RedisCommandReply& r = (*replies_)[items[0]];
    r = RedisCommandReply();
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

 private:
  std::vector<RedisCommandReply>* replies_;
  const std::vector<std::vector<std::string>>& commands_;
};

}  // namespace

std::unique_ptr<RedisBatchOp> LookupOp(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const BucketLayout* layout, std::vector<bool>* found) {
  return std::make_unique<LookupBatch>(ns, fingerprints, layout, found);
}

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

std::unique_ptr<RedisBatchOp> NextHintsOp(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints, const BucketLayout* layout,
    std::vector<NextHints>* hints) {
  return std::make_unique<NextHintsBatch>(ns, params_key, fingerprints,
                                          layout, hints);
}

std::unique_ptr<RedisBatchOp> CommandsOp(
    const std::vector<std::vector<std::string>>& commands, bool writes,
    std::vector<RedisCommandReply>* replies) {
  return std::make_unique<CommandsBatch>(commands, writes, replies);
}

}  // namespace chunkd::index
