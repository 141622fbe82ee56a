#include "clients/cli/index_command.h"

#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "index/fingerprint_index.h"
#include "index/redis_layout.h"
#ifdef CHUNKD_WITH_REDIS
#include "index/redis_config.h"
#include "index/redis_index.h"
#include "index/redis_migrate.h"
#endif

namespace chunkd::cli {

const absl::string_view kIndexUsage =
    R"(Usage: chunkctl index migrate --index URL [options]

Moves a Redis index to the bucket layout this chunkd keeps: from the
key-per-entry layout of chunkd 0.3 and before, or from buckets of another
bucket_bits. Every reference count, size and next-size hint is kept, and the
write-token records stay. Stop the chunkd servers of 0.3 and before that use
the database first; servers of this version may keep running: they pause
their index calls (UNAVAILABLE) while the migration runs and go on after it.
Interrupted, it is resumed by running it again.

Options:
  --index URL          the index, as chunkd's --index gives it:
                       redis://[[user]:password@]host:port[/db] or
                       redis-cluster://host:port[,host:port...]
                       (?password_file=PATH, or CHUNKD_REDIS_PASSWORD)
  --bucket-bits N      buckets per namespace, 2^N, 8..32 (default: the
                       database's own, or 18; `chunkctl size` suggests one)
  --settle-ms N        wait after marking the database before moving
                       anything, so that running chunkd servers pause
                       first (default 3000)
)";

std::vector<FlagSpec> MigrateFlagSpecs() {
  return {{"index"}, {"bucket-bits"}, {"settle-ms"}, {"help", false}};
}

absl::StatusOr<MigrateConfig> MigrateConfigFromArgs(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args.positional()[0], "\""));
  }
  MigrateConfig config;
  std::optional<std::string> index = args.Get("index");
  if (!index.has_value()) {
    return absl::InvalidArgumentError(
        "--index is required: the redis:// or redis-cluster:// URL of the "
        "index to migrate");
  }
  const absl::string_view backend = index::BackendOfSpec(*index);
  if (backend != "redis" && backend != "redis-cluster") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--index: only a redis:// or redis-cluster:// index has layouts to "
        "migrate, got \"",
        index::RedactIndexSpec(*index), "\""));
  }
  config.index = *index;
  if (std::optional<std::string> bits = args.Get("bucket-bits")) {
    absl::StatusOr<uint64_t> v =
        ParseUint("bucket-bits", *bits, index::kMaxBucketBits);
    if (!v.ok()) return v.status();
    if (*v < index::kMinBucketBits) {
      return absl::InvalidArgumentError(
          absl::StrCat("--bucket-bits must be ", index::kMinBucketBits, "..",
                       index::kMaxBucketBits, ", got ", *bits));
    }
    config.bucket_bits = static_cast<int>(*v);
  }
  if (std::optional<std::string> ms = args.Get("settle-ms")) {
    absl::StatusOr<uint64_t> v = ParseUint("settle-ms", *ms, 600000);
    if (!v.ok()) return v.status();
    config.settle = absl::Milliseconds(*v);
  }
  return config;
}

#ifdef CHUNKD_WITH_REDIS
absl::Status RunMigrate(const MigrateConfig& config, std::FILE* out,
                        std::FILE* err) {
  index::IndexOptions options;
  options.warn = [err](const std::string& line) {
    absl::FPrintF(err, "chunkctl: %s\n", line);
  };
  absl::StatusOr<index::RedisConfig> redis =
      index::ParseRedisSpec(config.index, options);
  if (!redis.ok()) return redis.status();
  index::RedisIndex db(*std::move(redis));
  index::MigrateOptions migrate;
  migrate.bucket_bits = config.bucket_bits;
  migrate.settle = config.settle;
  absl::Time next_line = absl::Now() + absl::Seconds(2);
  migrate.progress = [&](const index::MigrateProgress& p) {
    if (absl::Now() < next_line) return;
    next_line = absl::Now() + absl::Seconds(2);
    absl::FPrintF(err,
                  "chunkctl: index migrate: pass %d: %d keys moved, %d "
                  "entries written\n",
                  p.passes, p.keys, p.entries);
  };
  absl::FPrintF(err,
                "chunkctl: index migrate: %s: marking the database, then "
                "waiting %s for running chunkd servers to pause\n",
                index::RedactIndexSpec(config.index),
                absl::FormatDuration(config.settle));
  absl::StatusOr<index::MigrateProgress> done =
      index::MigrateRedisIndex(db, migrate);
  if (!done.ok()) return done.status();
  absl::FPrintF(out,
                "index migrate: moved %d entries from %d keys (%s) into "
                "buckets of bucket_bits %d in %d passes; the index serves "
                "again\n",
                done->entries, done->keys,
                done->from == "legacy" ? "the key-per-entry layout"
                                       : absl::StrCat("bucket_bits ", done->from),
                done->bucket_bits, done->passes);
  return absl::OkStatus();
}
#else
absl::Status RunMigrate(const MigrateConfig&, std::FILE*, std::FILE*) {
  return absl::UnimplementedError(
      "this chunkctl was built without the redis index "
      "(-DCHUNKD_WITH_REDIS=OFF)");
}
#endif

}  // namespace chunkd::cli
