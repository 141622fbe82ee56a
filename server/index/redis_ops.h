// The operations of the Redis index as batches (RedisBatchOp, run by
// RedisBatch, redis_batch.h): what each index call sends per item and how
// it reads the replies: the writes in redis_ops.cc, the reads in
// redis_read_ops.cc. docs/design.md, "The redis and redis-cluster
// backends", gives the keys, fields and values they touch; the scripts
// the writes call are in redis_scripts.cc.
//
//   Lookup           HEXISTS <bucket> <field> per item (EXISTS <key> in
//                    the key-per-entry layout)
//   Insert, Release  EVALSHA of the insert or release script, up to
//                    kMaxKeysPerCall entries a call, with the WriteToken's
//                    record when there is one
//   RecordNextSizes  EVALSHA of the record-next script, up to
//                    kMaxKeysPerCall entries a call
//   NextHintsOf      HGET <bucket> <field> per item (HMGET of the list and
//                    run fields in the key-per-entry layout)
//   Commands         any commands, one a call (chunkctl index migrate)
//
// Reads, RecordNextSizes and writes carrying a WriteToken are idempotent:
// the runner may send them again after an unknown outcome. Insert and
// Release without a token are not. On one server a token-carrying call ends
// where a string record of the token ends (every 65,536 positions).
//
// A factory takes the batch's items and a vector for the results, which
// the op resizes to one per item at once and fills as replies come; it is
// complete once RedisBatch::Run returned OK. `layout` nullptr: the
// key-per-entry layout of chunkd 0.3 (RedisConfig::legacy_layout). The
// items, the layout and the result vector must outlive the op.
//
// Thread safety: an op belongs to one call.
#ifndef CHUNKD_INDEX_REDIS_OPS_H_
#define CHUNKD_INDEX_REDIS_OPS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "index/fingerprint_index.h"
#include "index/redis_batch.h"
#include "index/redis_layout.h"

namespace chunkd::index {

// Entry keys per script call on one server: bounds how long one call keeps
// Redis busy (about 0.5 ms).
inline constexpr size_t kMaxKeysPerCall = 256;

// A command's reply: an integer, nil, or strings (a string's, a status',
// an array's of strings).
struct RedisCommandReply {
  long long integer = 0;
  bool nil = false;
  std::vector<std::string> strings;
};

// Whether each fingerprint has an entry.
std::unique_ptr<RedisBatchOp> LookupOp(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const BucketLayout* layout, std::vector<bool>* found);

// `token` may be nullptr; its records live `token_ttl`.
std::unique_ptr<RedisBatchOp> InsertOp(absl::string_view ns,
                                       absl::Span<const InsertEntry> entries,
                                       const WriteToken* token,
                                       absl::Duration token_ttl,
                                       const BucketLayout* layout,
                                       std::vector<InsertResult>* results);
std::unique_ptr<RedisBatchOp> ReleaseOp(
    absl::string_view ns, absl::Span<const std::string> fingerprints,
    const WriteToken* token, absl::Duration token_ttl,
    const BucketLayout* layout, std::vector<uint64_t>* left);

// Keeps up to `length` sizes per list (IndexOptions::next_sizes_length).
std::unique_ptr<RedisBatchOp> RecordNextOp(absl::string_view ns,
                                           absl::string_view params_key,
                                           absl::Span<const NextSize> hints,
                                           int length,
                                           const BucketLayout* layout);
std::unique_ptr<RedisBatchOp> NextHintsOp(
    absl::string_view ns, absl::string_view params_key,
    absl::Span<const std::string> fingerprints, const BucketLayout* layout,
    std::vector<NextHints>* hints);

// Each command on the key args[1] (EVAL: args[3]), routed by it; an error
// reply fails the batch.
std::unique_ptr<RedisBatchOp> CommandsOp(
    const std::vector<std::vector<std::string>>& commands, bool writes,
    std::vector<RedisCommandReply>* replies);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_OPS_H_
