// The read operations of redis_ops.h: Lookup, NextHintsOf, and the plain
// commands of chunkctl index migrate.
#include <utility>

#include "index/redis_entries.h"
#include "index/redis_ops.h"

namespace chunkd::index {
namespace {

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
  RedisEntries entries_;
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
        list_field_(layout ? HintTag(params_key)
                           : LegacyHintListField(params_key)),
        run_field_(LegacyHintRunField(params_key)) {
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
  RedisEntries entries_;
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
