// The byte formats of the RocksDB index's keys and values (docs/design.md,
// "The RocksDB backend"), apart from RocksDB itself so that they can be
// tested on their own. Format version 1 (kRocksDbFormatVersion): a change to
// anything here that an older chunkd would misread needs a new version.
//
//   entry key     <ns length: 1 byte><ns><fingerprint>
//   entry value   varint refs, varint size, varint lists, per list:
//                 varint key length, key, varint n, n varint sizes (most
//                 recent first), varint r, r varint run sizes
//   token key     <ns length><ns><stream id length><stream id><op: 1 byte>
//                 <first position: 8 bytes big-endian>
//   token value   <written: 8 bytes, microseconds since 1970, little-endian>
//                 varint n, n varint results (Insert: 2 * refs + is_new;
//                 Release: the count left)
//   entry count   8 bytes little-endian (merged as signed deltas)
//
// Thread safety: pure functions.
#ifndef CHUNKD_INDEX_ROCKSDB_ENCODING_H_
#define CHUNKD_INDEX_ROCKSDB_ENCODING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "index/fingerprint_index.h"

namespace chunkd::index::rocksdb_format {

struct HintList {
  std::string params_key;
  NextHints hints;
};

struct EntryValue {
  uint64_t refs = 0;
  uint32_t size = 0;
  std::vector<HintList> hints;
};

struct TokenRecord {
  uint64_t first = 0;
  std::vector<uint64_t> results;
};

std::string EntryKey(absl::string_view ns, absl::string_view fingerprint);
std::string EncodeEntry(const EntryValue& entry);
// False for bytes that are not an entry value.
bool DecodeEntry(absl::string_view bytes, EntryValue* entry);

// Records `hint` under `params_key`: its size moves to the front of the
// list (at most `max_sizes` distinct sizes), its run replaces the list's.
// Returns whether the entry changed.
bool AddHint(EntryValue* entry, absl::string_view params_key,
             const NextSize& hint, size_t max_sizes);

std::string TokenPrefix(absl::string_view ns, absl::string_view stream_id,
                        char op);
std::string TokenKey(absl::string_view prefix, uint64_t position);
std::string EncodeTokenValue(absl::Time written,
                             const std::vector<uint64_t>& results);
// Whether a token value was written more than `ttl` before `now` (an
// unreadable one counts as expired).
bool TokenExpired(absl::string_view value, absl::Time now, absl::Duration ttl);
// False for a key or value that is not a token record of `prefix_length`.
bool DecodeTokenRecord(absl::string_view key, absl::string_view value,
                       size_t prefix_length, TokenRecord* record);

std::string EncodeFixed64(uint64_t value);
// 0 for fewer than 8 bytes.
uint64_t DecodeFixed64(absl::string_view bytes);

}  // namespace chunkd::index::rocksdb_format

#endif  // CHUNKD_INDEX_ROCKSDB_ENCODING_H_
