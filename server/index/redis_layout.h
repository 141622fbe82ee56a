// The Redis index's data layout: where an entry lives (its bucket key and
// field), how its value is packed, and the key that names the layout of a
// database. docs/design.md, "The redis and redis-cluster backends", says why.
//
// Buckets. The entries of a namespace are spread over 2^bucket_bits bucket
// hashes, a bucket chosen by the first bucket_bits bits of the fingerprint:
//   key    chunkd-b<bits>:<ns>:<the fingerprint's first ceil(bits/8) bytes,
//          bits past the first bucket_bits zeroed>
//   field  the fingerprint after its first floor(bits/8) bytes (binary);
//          a fingerprint too short for that is whole in the field of the
//          bucket without bucket bytes, `chunkd-b<bits>:<ns>:`
//   value  uvarint(reference count) uvarint(size) hint record...
// A hint record holds the next-size hints of one chunking-parameter key:
//   tag    4 bytes, HintTag(params_key)
//   count  1 byte: 16 * (sizes in the list) + (sizes in the run)
//   the list's sizes, most recent first, then the run's, each a uvarint
// the most recently written record first; records that would make the
// value longer than kMaxValueBytes are dropped, oldest first. (uvarint: 7
// bits a byte, least significant first, high bit set on all but the last.)
// Small buckets of short values are what Redis keeps as listpacks: a few
// bytes of overhead per field instead of a key, a hash and their
// allocations per entry. There is no hash tag: a namespace spreads over
// every master of a cluster.
//
// The layout key `chunkd-layout` (a hash: version, bucket_bits, and
// migrating while `chunkctl index migrate` runs) says which layout a
// database holds; chunk servers of the key-per-entry layout (chunkd 0.3 and
// before, `chunkd:<ns>:<fingerprint>`) wrote none.
//
// Thread safety: plain values and functions.
#ifndef CHUNKD_INDEX_REDIS_LAYOUT_H_
#define CHUNKD_INDEX_REDIS_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chunkd::index {

inline constexpr char kLayoutKey[] = "chunkd-layout";
inline constexpr int kLayoutVersion = 2;
inline constexpr int kDefaultBucketBits = 18;
inline constexpr int kMinBucketBits = 8;
inline constexpr int kMaxBucketBits = 32;
// Longest value written: Redis' default hash-max-listpack-value.
inline constexpr size_t kMaxValueBytes = 64;
// The listpack settings the layout needs (checked at connect).
inline constexpr long long kMinListpackEntries = 512;
inline constexpr long long kMinListpackValue = 64;
// How a key of the layout before buckets starts (for SCAN MATCH).
inline constexpr char kLegacyKeyPattern[] = "chunkd:*";
// The command that moves a database to this layout (named in refusals).
inline constexpr char kMigrateCommand[] = "chunkctl index migrate";

class BucketLayout {
 public:
  // REQUIRES: kMinBucketBits <= bits <= kMaxBucketBits.
  explicit BucketLayout(int bits);

  int bits() const { return bits_; }
  // "chunkd-b<bits>:<ns>:": the keys of a namespace start so.
  std::string KeyPrefix(absl::string_view ns) const;
  // Bytes of the bucket part of a key.
  size_t bucket_bytes() const { return bucket_bytes_; }
  // REQUIRES: ValidFingerprint(fp).
  std::string BucketKey(absl::string_view ns, absl::string_view fp) const;
  absl::string_view Field(absl::string_view fp) const {
    return short_fingerprint(fp) ? fp : fp.substr(field_offset_);
  }
  // The fingerprint of `field` in the bucket whose key ends in `bucket`
  // (empty for the bucket of short fingerprints).
  std::string Fingerprint(absl::string_view bucket,
                          absl::string_view field) const;
  // OK unless `fp` is empty (INVALID_ARGUMENT).
  absl::Status ValidFingerprint(absl::string_view fp) const;
  // A fingerprint too short to leave a field past its bucket's bytes (none
  // that chunkd computes) lives whole in the namespace's bucket without
  // bucket bytes.
  bool short_fingerprint(absl::string_view fp) const {
    return fp.size() < bucket_bytes_ || fp.size() <= field_offset_;
  }

 private:
  int bits_;
  size_t bucket_bytes_;  // ceil(bits / 8)
  size_t field_offset_;  // floor(bits / 8)
};

// The 4-byte tag of a chunking-parameter key in hint records (FNV-1a, 32
// bits, big-endian). Two keys of one namespace share a tag with odds of
// one in 2^32; hints are advice either way.
std::string HintTag(absl::string_view params_key);

struct HintRecord {
  std::string tag;
  std::vector<uint32_t> sizes;
  std::vector<uint32_t> run;
};

struct EntryValue {
  uint64_t refs = 0;
  uint32_t size = 0;
  std::vector<HintRecord> hints;  // most recent first
};

// False when `value` is not a value of this layout.
bool DecodeEntryValue(absl::string_view value, EntryValue* out);
// Records past kMaxValueBytes are dropped, and lists or runs longer than
// 15 cut to 15.
std::string EncodeEntryValue(const EntryValue& value);
void AppendUvarint(uint64_t v, std::string* out);

// What the layout key holds; version 0 when it is absent.
struct LayoutRecord {
  int version = 0;
  int bucket_bits = 0;
  bool migrating = false;
  // What a migration under way moves from: "legacy" (the key-per-entry
  // layout) or the bucket_bits of the buckets it empties.
  std::string migrating_from;
};

// The layout key's fields (HGETALL's reply, name then value);
// FAILED_PRECONDITION naming the field for a malformed one.
absl::StatusOr<LayoutRecord> ParseLayoutRecord(
    const std::vector<std::string>& fields);

// Appends the sizes of a hint field of the layout before buckets,
// "s,s,s"; false if malformed.
bool ParseLegacySizes(absl::string_view text, std::vector<uint32_t>* out);

// The key of the layout before buckets: chunkd:<ns>:<fingerprint>.
std::string LegacyEntryKey(absl::string_view ns, absl::string_view fp);
// The fields of an entry's hints under `params_key` in the layout before
// buckets: its list, h:<params_key>, and its run, r:<params_key>.
std::string LegacyHintListField(absl::string_view params_key);
std::string LegacyHintRunField(absl::string_view params_key);

}  // namespace chunkd::index

#endif  // CHUNKD_INDEX_REDIS_LAYOUT_H_
