#include "index/redis_migrate.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "index/redis_layout.h"

namespace chunkd::index {
namespace {

// Passes before the migration gives up on keys that keep changing (a
// chunkd of the old layout still writing).
constexpr int kMaxPasses = 100;
constexpr char kFromLegacy[] = "legacy";

// Deletes KEYS[1] if its fields and values are still ARGV, in order.
constexpr char kDeleteIfUnchanged[] = R"lua(-- chunkd migrate delete v1
local cur = redis.call('HGETALL', KEYS[1])
if #cur ~= #ARGV then return 0 end
for i = 1, #cur do
  if cur[i] ~= ARGV[i] then return 0 end
end
redis.call('DEL', KEYS[1])
return 1
)lua";

// An entry to write: its bucket key, field and value.
struct Move {
  std::string key;
  std::string field;
  std::string value;
};

absl::Status NotAnEntry(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("redis key \"", absl::CHexEscape(key),
                   "\" is not an index entry of chunkd 0.3 (", why,
                   "); remove it or move it out of this database, then run "
                   "the migration again"));
}

// The legacy hash `fields` (name, value, ...) of `key` as an entry value.
absl::StatusOr<EntryValue> LegacyValue(absl::string_view key,
                                       const std::vector<std::string>& fields) {
  EntryValue value;
  bool has_refs = false;
  // Records by parameter key, the lists before their runs.
  std::vector<std::pair<std::string, HintRecord>> records;
  auto record = [&](absl::string_view params) -> HintRecord& {
    for (auto& [p, r] : records) {
      if (p == params) return r;
    }
    records.push_back({std::string(params), HintRecord{HintTag(params), {}, {}}});
    return records.back().second;
  };
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    absl::string_view name = fields[i];
    const std::string& v = fields[i + 1];
    if (name == "r") {
      has_refs = absl::SimpleAtoi(v, &value.refs);
      if (!has_refs) return NotAnEntry(key, "a malformed count");
    } else if (name == "s") {
      if (!absl::SimpleAtoi(v, &value.size)) {
        return NotAnEntry(key, "a malformed size");
      }
    } else if (absl::ConsumePrefix(&name, "h:")) {
      if (!ParseLegacySizes(v, &record(name).sizes)) {
        return NotAnEntry(key, "a malformed hint list");
      }
    } else if (absl::ConsumePrefix(&name, "r:")) {
      if (!ParseLegacySizes(v, &record(name).run)) {
        return NotAnEntry(key, "a malformed hint run");
      }
    }
  }
  if (!has_refs) return NotAnEntry(key, "no count field r");
  for (auto& [p, r] : records) {
    if (r.sizes.empty()) continue;  // a run without its list is no hint
    if (r.run.size() > kHintRunLength) r.run.resize(kHintRunLength);
    value.hints.push_back(std::move(r));
  }
  return value;
}

// A migration: what it moves from and to, and how far it got.
class Migration {
 public:
  Migration(RedisIndex& index, const MigrateOptions& options)
      : index_(index), options_(options) {}

  absl::StatusOr<MigrateProgress> Run();

 private:
  absl::Status Begin();
  absl::StatusOr<bool> Pass();
  absl::StatusOr<bool> ScanMaster(RedisEndpoint& master);
  absl::Status MoveKeys(const std::vector<std::string>& keys);
  absl::Status EntriesOf(const std::string& key,
                         const std::vector<std::string>& fields,
                         std::vector<Move>* moves) const;
  std::string SourcePattern() const {
    return from_bits_ == 0 ? kLegacyKeyPattern
                           : absl::StrCat("chunkd-b", from_bits_, ":*");
  }

  RedisIndex& index_;
  const MigrateOptions& options_;
  MigrateProgress progress_;
  int from_bits_ = 0;  // 0: legacy
  std::optional<BucketLayout> to_;
  std::optional<BucketLayout> from_;
};

absl::StatusOr<MigrateProgress> Migration::Run() {
  if (absl::Status s = Begin(); !s.ok()) return s;
  if (progress_.nothing_to_do) return progress_;
  absl::SleepFor(options_.settle);
  bool found = true;
  while (found) {
    if (++progress_.passes > kMaxPasses) {
      return absl::AbortedError(absl::StrCat(
          "source keys kept changing through ", kMaxPasses,
          " passes: is a chunkd of the old layout still writing? Stop it "
          "and run the migration again"));
    }
    absl::StatusOr<bool> pass = Pass();
    if (!pass.ok()) return pass.status();
    found = *pass;
  }
  auto done = index_.Commands({{"HDEL", kLayoutKey, "migrating"}},
                              /*writes=*/true);
  if (!done.ok()) return done.status();
  return progress_;
}

// Reads the layout key and marks the database (or resumes its mark).
absl::Status Migration::Begin() {
  auto read = index_.Commands({{"HGETALL", kLayoutKey}}, /*writes=*/false);
  if (!read.ok()) return read.status();
  absl::StatusOr<LayoutRecord> record = ParseLayoutRecord((*read)[0].strings);
  if (!record.ok()) return record.status();
  const int asked = options_.bucket_bits;
  int to = asked > 0 ? asked : kDefaultBucketBits;
  std::string from = kFromLegacy;
  if (record->migrating) {
    if (asked > 0 && asked != record->bucket_bits) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a migration to bucket_bits ", record->bucket_bits,
          " is under way on this database; finish it first (run it again "
          "without --bucket-bits)"));
    }
    to = record->bucket_bits;
    from = record->migrating_from;
  } else if (record->version == kLayoutVersion) {
    if (asked == 0 || asked == record->bucket_bits) {
      // Buckets already; legacy keys, if any (a chunkd 0.3 that ran on
      // it), are moved into them.
      to = record->bucket_bits;
    } else {
      from = std::to_string(record->bucket_bits);
    }
  }
  if (from != kFromLegacy &&
      (!absl::SimpleAtoi(from, &from_bits_) || from_bits_ < kMinBucketBits ||
       from_bits_ > kMaxBucketBits)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the redis key ", kLayoutKey, " has a malformed migrating '",
        absl::CHexEscape(from), "'"));
  }
  to_.emplace(to);
  if (from_bits_ > 0) from_.emplace(from_bits_);
  progress_.from = from;
  progress_.bucket_bits = to;
  auto mark = index_.Commands(
      {{"HSET", kLayoutKey, "version", std::to_string(kLayoutVersion),
        "bucket_bits", std::to_string(to), "migrating", from}},
      /*writes=*/true);
  return mark.status();
}

// One pass over every master; true when it found source keys.
absl::StatusOr<bool> Migration::Pass() {
  absl::StatusOr<std::vector<RedisEndpoint*>> masters = index_.Masters();
  if (!masters.ok()) return masters.status();
  bool found = false;
  for (RedisEndpoint* master : *masters) {
    absl::StatusOr<bool> any = ScanMaster(*master);
    if (!any.ok()) return any.status();
    found = found || *any;
  }
  return found;
}

absl::StatusOr<bool> Migration::ScanMaster(RedisEndpoint& master) {
  bool found = false;
  std::string cursor = "0";
  do {
    std::vector<std::string> keys;
    {
      auto lease = master.Acquire();
      if (!lease.ok()) return lease.status();
      ReplyPtr reply = RedisCommand(
          lease->context(),
          {"SCAN", cursor, "MATCH", SourcePattern(), "COUNT", "1000"});
      if (reply == nullptr) {
        lease->MarkBroken();
        return master.ContextError(lease->context());
      }
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
          reply->element[0]->type != REDIS_REPLY_STRING ||
          reply->element[1]->type != REDIS_REPLY_ARRAY) {
        return master.ReplyError(reply->type == REDIS_REPLY_ERROR
                                     ? absl::string_view(reply->str, reply->len)
                                     : "unexpected reply to SCAN");
      }
      cursor.assign(reply->element[0]->str, reply->element[0]->len);
      const redisReply& page = *reply->element[1];
      for (size_t i = 0; i < page.elements; ++i) {
        keys.emplace_back(page.element[i]->str, page.element[i]->len);
      }
    }
    if (keys.empty()) continue;
    found = true;
    if (absl::Status s = MoveKeys(keys); !s.ok()) return s;
  } while (cursor != "0");
  return found;
}

absl::Status Migration::MoveKeys(const std::vector<std::string>& keys) {
  std::vector<std::vector<std::string>> reads;
  reads.reserve(keys.size());
  for (const std::string& key : keys) reads.push_back({"HGETALL", key});
  auto contents = index_.Commands(reads, /*writes=*/false);
  if (!contents.ok()) return contents.status();
  std::vector<Move> moves;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::Status s = EntriesOf(keys[i], (*contents)[i].strings, &moves);
    if (!s.ok()) return s;
  }
  std::vector<std::vector<std::string>> writes;
  writes.reserve(moves.size());
  for (Move& m : moves) {
    writes.push_back({"HSET", std::move(m.key), std::move(m.field),
                      std::move(m.value)});
  }
  if (auto w = index_.Commands(writes, /*writes=*/true); !w.ok()) {
    return w.status();
  }
  progress_.entries += moves.size();
  std::vector<std::vector<std::string>> deletes;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<std::string> del = {"EVAL", kDeleteIfUnchanged, "1", keys[i]};
    for (std::string& f : (*contents)[i].strings) del.push_back(std::move(f));
    deletes.push_back(std::move(del));
  }
  auto deleted = index_.Commands(deletes, /*writes=*/true);
  if (!deleted.ok()) return deleted.status();
  for (const RedisIndex::CommandReply& r : *deleted) progress_.keys += r.integer;
  if (options_.progress) options_.progress(progress_);
  if (options_.stop_after_keys > 0 &&
      progress_.keys >= options_.stop_after_keys) {
    return absl::AbortedError(
        absl::StrCat("stopped after ", progress_.keys, " keys, as asked"));
  }
  return absl::OkStatus();
}

// The entries of the source key `key` holding `fields`, as moves.
absl::Status Migration::EntriesOf(const std::string& key,
                                  const std::vector<std::string>& fields,
                                  std::vector<Move>* moves) const {
  if (fields.empty()) return absl::OkStatus();  // gone meanwhile
  absl::string_view rest = key;
  if (from_bits_ == 0) {
    // chunkd:<ns>:<fingerprint>
    absl::ConsumePrefix(&rest, "chunkd:");
    const size_t colon = rest.find(':');
    if (colon == absl::string_view::npos || colon + 1 == rest.size()) {
      return NotAnEntry(key, "no namespace and fingerprint");
    }
    const absl::string_view ns = rest.substr(0, colon);
    const absl::string_view fp = rest.substr(colon + 1);
    absl::StatusOr<EntryValue> value = LegacyValue(key, fields);
    if (!value.ok()) return value.status();
    moves->push_back({to_->BucketKey(ns, fp), std::string(to_->Field(fp)),
                      EncodeEntryValue(*value)});
    return absl::OkStatus();
  }
  // chunkd-b<bits>:<ns>:<bucket>
  absl::ConsumePrefix(&rest, absl::StrCat("chunkd-b", from_bits_, ":"));
  const size_t colon = rest.find(':');
  if (colon == absl::string_view::npos) {
    return NotAnEntry(key, "no namespace");
  }
  const absl::string_view ns = rest.substr(0, colon);
  const absl::string_view bucket = rest.substr(colon + 1);
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string fp = from_->Fingerprint(bucket, fields[i]);
    moves->push_back(
        {to_->BucketKey(ns, fp), std::string(to_->Field(fp)), fields[i + 1]});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MigrateProgress> MigrateRedisIndex(
    RedisIndex& index, const MigrateOptions& options) {
  return Migration(index, options).Run();
}

}  // namespace chunkd::index
