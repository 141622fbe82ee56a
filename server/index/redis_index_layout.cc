// RedisIndex's layout key (redis_layout.h): read at the first call and at
// every health probe, written for a new database; a database of the
// key-per-entry layout is refused.
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "index/redis_index.h"
#include "index/redis_layout.h"

namespace chunkd::index {
namespace {

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

}  // namespace chunkd::index
