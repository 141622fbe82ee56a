// Moving a Redis index to the bucket layout (redis_layout.h) with a given
// bucket_bits: from the key-per-entry layout of chunkd 0.3 and before
// (keys chunkd:<ns>:<fingerprint>, hashes of r, s, h:<params>, r:<params>),
// or from buckets of another bucket_bits. `chunkctl index migrate` runs it;
// docs/operations.md, "Moving an index to the bucket layout", is the guide.
//
// How. The layout key is marked `migrating` (with what it moves from) and
// `bucket_bits` set to the target first; chunkd servers running on the
// database read it at their next health probe (every second) and refuse
// index calls with UNAVAILABLE meanwhile, so the migration waits `settle`
// before it moves anything. Then, in passes over every master (SCAN of the
// source keys, 1000 at a time): each source key is read (HGETALL), its
// entries written to their target buckets (HSET of the whole value: writing
// it twice is harmless), and the source key deleted only if it still holds
// what was read (a Lua compare-and-delete; a key changed meanwhile is moved
// again in the next pass). A pass that finds no source key ends it: the
// mark is removed and the index serves again. Interrupted at any point, it
// is resumed by running it again: every step is idempotent, and what was
// moved is gone from the source. Write-token records (chunkd-tok:) are the
// same in both layouts and stay.
//
// Thread safety: one migration of a database at a time.
#ifndef CHUNKD_INDEX_REDIS_MIGRATE_H_
#define CHUNKD_INDEX_REDIS_MIGRATE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "index/redis_index.h"

namespace chunkd::index {

struct MigrateProgress {
  std::string from;      // "legacy", or the source's bucket_bits
  int bucket_bits = 0;   // the target's
  int passes = 0;        // passes begun
  uint64_t keys = 0;     // source keys moved and deleted
  uint64_t entries = 0;  // entries written (again, for a key moved twice)
  bool nothing_to_do = false;
};

struct MigrateOptions {
  // The target's bucket_bits; 0: the database's own, or 18 for a database
  // without buckets.
  int bucket_bits = 0;
  // How long to wait, once the database is marked, before moving anything.
  absl::Duration settle = absl::Seconds(3);
  // Called after every batch of source keys.
  std::function<void(const MigrateProgress&)> progress;
  // Stop (ABORTED) after this many source keys; 0: never. For tests of
  // resuming.
  uint64_t stop_after_keys = 0;
};

// Runs (or resumes) the migration on the database `index` talks to. The
// index must be made from the spec with its RedisConfig (no layout check).
// FAILED_PRECONDITION for a database another migration is taking elsewhere
// (a different target bucket_bits), INVALID_ARGUMENT for a source key that
// is not an index entry (named), else an index call's failure.
absl::StatusOr<MigrateProgress> MigrateRedisIndex(
    RedisIndex& index, const MigrateOptions& options);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_MIGRATE_H_
